"""Runtime introspection in the user's environment: one stand-alone script.

This file is run by the *user's* interpreter (``python -I introspect_worker.py ...``),
so it imports only the standard library and nothing from ``adaptrack_lsp``.  It is also
imported in-process (``adaptrack_lsp.apis.introspect_worker``) so that the
definitions of "public member" and "removed-API placeholder" exist exactly once.

Definitions (shared by the runtime fallback, the ``index`` command and the agreement
tests):

- a **public member** of an object ``o`` is a name ``n`` that does not start with ``_``
  and for which ``getattr(o, n)`` succeeds after ``import`` of the module; candidates
  are ``dir(o)`` plus any extra names supplied by the caller (names a static analysis
  saw); the index and the walk also try the identifier strings in the source of a
  module's own ``__getattr__`` (`getattr_names`: NumPy serves ``np.chararray`` so);
- a member that is a lazily loaded module (a ``ModuleType`` subclass, e.g. Keras-3
  lazy loaders) must also answer ``dir()``; if loading it raises, it is absent;
- a **removed-API placeholder** is a Python function whose body is only an optional
  docstring followed by a single ``raise`` (``torch.matrix_rank`` in torch 2.x); it
  counts as absent;
- a member is **deprecated** when it announces so in a way the runtime can read:
  reading it emits a deprecation warning addressed to the reader (NumPy's and pandas'
  module ``__getattr__``), it carries PEP 702's ``__deprecated__``
  (``warnings.deprecated``), or its own docstring has a ``.. deprecated::`` directive
  about the object itself (pandas' ``deprecate`` wrapper writes one); see
  `deprecation_of`.  The message is what the library says;
- the **signature** of a callable is ``inspect.signature`` of it (a class: of its
  constructor), written in Python's parameter notation (``["x", "rate", "/", "*",
  "seed", "**kwargs"]``, `signature_items`); a method reached through a class after
  ``()`` (an instance) drops its first parameter.  None when ``inspect`` finds no
  signature (C functions without text signatures): any keyword is then allowed.

Modes:

- ``--serve``: JSON lines on stdin/stdout.  Request ``{"id": 1, "op": "members",
  "path": ["numpy", "linalg"], "extra": ["matlib"]}``, answer ``{"id": 1, "members":
  {"norm": ["function", false], ...}}`` or ``{"id": 1, "members": null, "error": "..."}``;
  a deprecated member has its message as a third item (``["class", true, "..."]``).
  With ``"signatures": true`` the answer also has ``"signatures": {"histogram": [...],
  ...}`` for the callable members.  ``{"op": "signature", "path": ["pandas",
  "DataFrame", "()", "to_csv"]}`` answers ``{"id": .., "signature": [...]}`` (``null``
  and ``"error"`` when there is none); a ``"()"`` may only follow a class.
  ``{"op": "ping"}`` answers ``{"id": .., "pong": true, "python": "3.11.7"}``.
- ``--walk PACKAGE [--max-depth N]``: print a snapshot JSON of the package's public API.
- ``--limits as=BYTES,cpu=SECONDS,fsize=BYTES,core=0``: resource limits this process
  sets on itself (POSIX ``resource``) before it imports anything it is asked about;
  ``ping`` answers with the limits in force.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import sys
import textwrap
import types
import warnings

# --------------------------------------------------------------------------- placeholders


def body_only_raises(source: str) -> bool:
    """Whether the first function defined in `source` only raises.

    The body must be an optional docstring followed by exactly one ``raise`` statement.
    """
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return function_node_only_raises(node)
    return False


def function_node_only_raises(node) -> bool:
    """Whether an ``ast`` function node's body is [docstring] + a single ``raise``."""
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return len(body) == 1 and isinstance(body[0], ast.Raise)


def is_placeholder(obj) -> bool:
    """Whether `obj` is a Python function whose body only raises (a removed API)."""
    try:
        target = inspect.unwrap(obj)
    except Exception:
        target = obj
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        return False
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError):
        return False
    return body_only_raises(source)


# --------------------------------------------------------------------------- deprecations

#: the underline of a section heading (numpydoc ``Parameters`` / ``----------``, reST titles)
_UNDERLINE = re.compile(r"^[-=~^\"'`#*+]{3,}$")
#: a reST role (``:class:`~numpy.typing.NBitBase```, ``:func:`name <target>```)
_ROLE = re.compile(r":[\w.:-]+:`~?([^`<]*?)(?:\s*<[^`>]*>)?`")
_DIRECTIVE = ".. deprecated::"
#: a directive body about some of the arguments, not the object (SciPy's
#: ``_deprecate_positional_args``: "Use of argument(s) ... by position is deprecated")
_ABOUT_ARGUMENTS = re.compile(
    r"^(?:use of |passing |the )?(?:`[^`]*` )?(?:positional )?(?:arguments?|argument\(s\)|parameters?|keywords?)\b", re.I
)


def _one_line(text: str) -> str:
    """reST as one plain line: roles and double-backquoted literals as `code`."""
    text = _ROLE.sub(lambda m: "`%s`" % m.group(1).strip(), text).replace("``", "`")
    return " ".join(text.split())


def _indentation(line: str) -> int:
    return len(line) - len(line.lstrip())


def docstring_deprecation(doc) -> str:
    """The deprecation a docstring announces with a ``.. deprecated::`` directive about
    the object itself: in the cleaned docstring, no more indented than its summary line
    and before any section heading (a directive indented under a parameter or a return
    value, in a later section of a module's documentation, or one whose body is about
    some arguments, deprecates something else).  The message: the first paragraph of
    the directive's body, else ``deprecated since <version>``; "" for none."""
    if not isinstance(doc, str) or _DIRECTIVE not in doc:
        return ""
    lines = inspect.cleandoc(doc).splitlines()
    summary = next((_indentation(line) for line in lines if line.strip()), 0)
    for number, line in enumerate(lines):
        text = line.strip()
        if text and number + 1 < len(lines) and _UNDERLINE.match(lines[number + 1].strip()):
            return ""  # a section heading: what follows is about something else
        if not text.startswith(_DIRECTIVE) or _indentation(line) > summary:
            continue
        version = text[len(_DIRECTIVE):].strip()
        body = []
        for following in lines[number + 1:]:
            if following.strip() and _indentation(following) <= _indentation(line):
                break
            body.append(following)
        message = _one_line(textwrap.dedent("\n".join(body)).strip().split("\n\n")[0])
        if _ABOUT_ARGUMENTS.match(message):
            return ""
        return message or ("deprecated since %s" % version if version else "deprecated")
    return ""


def _is_deprecation(category, text: str) -> bool:
    """Whether a warning of `category` saying `text` announces a deprecation."""
    if not isinstance(category, type):
        return False
    if issubclass(category, (DeprecationWarning, PendingDeprecationWarning)) or "Deprecat" in category.__name__:
        return True
    return issubclass(category, FutureWarning) and "deprecat" in text.lower()


def warned_deprecation(warned, name: str, reader=None) -> str:
    """The message of a deprecation warning among `warned` (what reading member `name`
    emitted) that is addressed to the reader: attributed to the line that read it (the
    ``stacklevel`` a library's ``__getattr__`` gives; `reader`: the file of that line,
    `member_value`'s by default), or naming `name`.  A warning from deeper inside (an
    import the access triggered) is not about the member; "" for none."""
    here = reader or member_value.__code__.co_filename
    for record in warned or ():
        text = str(record.message)
        if not _is_deprecation(record.category, text):
            continue
        if record.filename == here or re.search(r"(?<![\w])%s(?![\w])" % re.escape(name), text):
            return _one_line(text)
    return ""


def _own_namespace(obj):
    """``obj.__dict__`` read without a ``__getattr__`` fallback (None where there is none)."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        return None
    return namespace if isinstance(namespace, (dict, types.MappingProxyType)) else None


def declared_deprecation(value) -> str:
    """What `value` itself says about its deprecation: PEP 702's ``__deprecated__`` (set
    by ``warnings.deprecated`` / ``typing_extensions.deprecated``; a class's own, not one
    inherited from a deprecated base; a method's or a property getter's), else a
    ``.. deprecated::`` directive in its own docstring (`docstring_deprecation`; an
    instance's ``__doc__`` counts only where it is not its type's).  "" for none."""
    target = value
    if inspect.ismethod(target) or isinstance(target, (staticmethod, classmethod)):
        target = target.__func__
    elif isinstance(target, property) and target.fget is not None:
        target = target.fget
    namespace = _own_namespace(target)
    marker = namespace.get("__deprecated__") if namespace is not None else None
    if isinstance(marker, str) and marker.strip():
        return _one_line(marker)
    if inspect.isclass(target):
        doc = namespace.get("__doc__") if namespace is not None else None
    elif isinstance(target, types.ModuleType) or inspect.isroutine(target):
        doc = getattr(target, "__doc__", None)
    else:
        try:
            doc = target.__doc__
            if doc is getattr(type(target), "__doc__", None):
                doc = None
        except Exception:
            doc = None
    return docstring_deprecation(doc)


def deprecation_of(value, name: str, warned=(), reader=None) -> str:
    """The deprecation message of member `name` whose value is `value` ("" when it does
    not announce one): a deprecation warning reading it emitted (`warned_deprecation`:
    NumPy's and others' module ``__getattr__``), else `declared_deprecation`."""
    try:
        return warned_deprecation(warned, name, reader) or declared_deprecation(value)
    except Exception:
        return ""


# --------------------------------------------------------------------------- members


def kind_of(obj) -> str:
    """jedi-style kind of a runtime object."""
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if inspect.isroutine(obj):
        return "function"
    return "instance"


def has_members(kind: str) -> bool:
    return kind not in ("function", "keyword")


def is_lazy_module(obj) -> bool:
    return isinstance(obj, types.ModuleType) and type(obj) is not types.ModuleType


def member_value(obj, name: str, warned=None):
    """``getattr(obj, name)`` with warnings silenced; raises what getattr raises.

    A lazily loaded module is also asked for ``dir()`` (which loads it): if that
    raises, the member does not exist in this environment.  `warned`: a list that
    receives the warnings the access emitted (``warnings.WarningMessage``).
    """
    with warnings.catch_warnings(record=warned is not None) as caught:
        warnings.simplefilter("ignore" if warned is None else "always")
        value = getattr(obj, name)
        if is_lazy_module(value):
            dir(value)
    if warned is not None:
        warned.extend(caught)
    return value


def public_members(obj, extra_names=(), private=False, placeholders=False, deprecations=None, module_getattr=False) -> dict:
    """Public members of `obj`: name -> (kind, has_members).  See the module docstring.
    `private`: names starting with ``_`` too (what the checks compare against: a
    private name that exists at run time is not rejected; one that does not is).
    `placeholders`: keep functions whose body only raises (a class's abstract methods,
    which its subclasses implement; a module's such function is a removed API).
    `deprecations`: a dict that receives name -> message for the members that announce
    their deprecation (`deprecation_of`).  `module_getattr`: the names a module's own
    ``__getattr__`` serves beyond ``dir()`` are candidates too (`getattr_names`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            names = set(dir(obj))
        except Exception:
            names = set()
    names.update(extra_names)
    if module_getattr:
        names.update(getattr_names(obj))
    result = {}
    for name in sorted(names):
        if not isinstance(name, str) or (name.startswith("_") and not private) or not name.isidentifier():
            continue
        warned = [] if deprecations is not None else None
        try:
            value = member_value(obj, name, warned)
        except Exception:
            continue
        if not placeholders and is_placeholder(value):
            continue
        kind = kind_of(value)
        result[name] = (kind, has_members(kind))
        if deprecations is not None:
            message = deprecation_of(value, name, warned)
            if message:
                deprecations[name] = message
    return result


def getattr_names(module) -> set:
    """The names a module's own Python ``__getattr__`` (PEP 562) may serve beyond
    ``dir()``: the identifier strings its source compares or looks up (``if attr ==
    "chararray"``, a dict of deprecated aliases).  Candidates only: `public_members`
    keeps those that ``getattr`` returns (NumPy's ``__getattr__`` names removed
    aliases only to raise)."""
    if not isinstance(module, types.ModuleType):
        return set()
    hook = _own_namespace(module)
    hook = hook.get("__getattr__") if hook is not None else None
    if not inspect.isfunction(hook):
        return set()
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(hook)))
    except Exception:
        return set()
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier()
    }


def metaclass_names(cls) -> list:
    """The names a class offers through its metaclass (``dir(type(cls))``), which
    ``dir(cls)`` leaves out: ``collections.abc.Sequence.register`` (``ABCMeta``),
    ``mro``.  Its instances do not have them."""
    try:
        return [name for name in dir(type(cls)) if isinstance(name, str)]
    except Exception:
        return []


#: the attribute name `serves_any_name` asks a module's ``__getattr__`` for
_UNLIKELY_NAME = "_adaptrack_unlikely_attribute_name"


def serves_any_name(module) -> bool:
    """Whether a module's own Python ``__getattr__`` (PEP 562) returns a value even for
    a name nobody defines (``test.test_module.good_getattr``): then any attribute may
    exist.  NumPy's and SciPy's raise AttributeError for unknown names."""
    if not isinstance(module, types.ModuleType):
        return False
    namespace = _own_namespace(module)
    hook = namespace.get("__getattr__") if namespace is not None else None
    if not inspect.isfunction(hook):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hook(_UNLIKELY_NAME)
    except BaseException:  # noqa: BLE001 - whatever it raises, the name is refused
        return False
    return True


def member_signatures(obj, members, bound=False) -> dict:
    """name -> `signature_of` for the callable members (functions, classes, callable
    instances) of `obj`; members without a signature are left out.  `bound`: `obj` is a
    class whose members are asked as an instance's (a plain function loses ``self``)."""
    found = {}
    for name, (kind, _) in members.items():
        if kind == "module" or name == ANY_ATTRIBUTE:
            continue
        try:
            value = member_value(obj, name)
            static = inspect.getattr_static(obj, name) if bound else None
            items = signature_of(value, bound and is_instance_method(static))
        except Exception:
            continue
        if items is not None:
            found[name] = items
    return found


def resolve(path):
    """Import ``path[0]`` and follow the attribute chain; submodules are imported when
    the parent does not expose them yet (``import a.b`` makes ``a.b`` valid)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        obj = importlib.import_module(path[0])
    for i in range(1, len(path)):
        try:
            obj = member_value(obj, path[i])
        except AttributeError:
            if not isinstance(obj, types.ModuleType):
                raise
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = importlib.import_module(".".join(path[: i + 1]))
        if is_placeholder(obj):
            raise AttributeError("%s is a removed-API placeholder" % ".".join(path[: i + 1]))
    return obj


# --------------------------------------------------------------------------- instances

#: the members-table key saying that instances have attributes beyond the listed ones:
#: its kind is ``"any"`` (any attribute, callable or not) or ``"values"`` (only
#: non-callable values: a proxy that serves data, so a *call* of an unlisted name fails)
ANY_ATTRIBUTE = "*"

#: ``__getattr__`` implementations known to serve only non-callable values, by
#: (module, qualified name): pandas' NDFrame.__getattr__ returns columns (``df.price``
#: may be a column; ``df.append(row)`` calls a method that must exist), and GroupBy's
#: the grouped column (``df.groupby("a").price``, not callable: ``.pad()`` must exist)
VALUE_PROXIES = {("pandas.core.generic", "NDFrame.__getattr__"), ("pandas.core.groupby.groupby", "GroupBy.__getattr__")}

#: C classes whose instances keep a ``__dict__`` that the library fills with data only:
#: ``open()`` sets ``mode`` (and ``name``) on the file objects of ``io``, so an unlisted
#: attribute may be read there but not called (``fh.xreadlines()``)
DATA_DICT_MODULES = frozenset({"_io", "io", "_pyio"})


def class_path(cls) -> str:
    """Where `cls` is defined: ``module.QualName`` (``pandas.core.frame.DataFrame``)."""
    return "%s.%s" % (cls.__module__, cls.__qualname__)


def _class_node(cls):
    """The ``ast.ClassDef`` of `cls` in the file its methods were compiled from (not
    ``cls.__module__``, which decorators such as NumPy's ``set_module`` rewrite), or
    None where there is no Python source."""
    method = _own_method(cls)
    if method is None:
        return None
    tree = _parsed_file(method.__code__.co_filename)
    if tree is None:
        return None
    nodes = tree.body
    found = None
    for part in cls.__qualname__.split("."):
        if part == "<locals>":
            return None
        found = next((n for n in nodes if isinstance(n, ast.ClassDef) and n.name == part), None)
        if found is None:
            return None
        nodes = found.body
    return found


_PARSED = {}


def _parsed_file(filename):
    if filename not in _PARSED:
        try:
            with open(filename, "rb") as handle:
                _PARSED[filename] = ast.parse(handle.read())
        except Exception:
            _PARSED[filename] = None
    return _PARSED[filename]


def _is_owner_dict(node, owner) -> bool:
    """``owner.__dict__`` or ``vars(owner)``."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return isinstance(node.value, ast.Name) and node.value.id == owner
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars"
        and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == owner
    )


#: a call that makes an instance of the class inside its own methods: ``cls(...)``,
#: ``type(self)(...)``, ``object.__new__(cls)``, ``self.__class__(...)`` (or the class's
#: own name, matched apart)
_NEW_INSTANCE = re.compile(r"^(cls|type\(\w+\)|[\w.]*__new__|\w+\.__class__)$")


def _owner_writes(function, owner, scope, depth=0):
    """(names `function` assigns as ``owner.NAME``, whether it may set other attributes
    of `owner`): ``setattr(owner, <not a literal>, ...)``, its ``__dict__`` written
    through ``update``/``setdefault``/item assignment, or `owner` handed to a function
    that may set attributes (see `_handed_to`)."""
    names = set()
    dynamic = False
    for inner in ast.walk(function):
        targets = []
        if isinstance(inner, ast.Assign):
            targets = inner.targets
        elif isinstance(inner, (ast.AnnAssign, ast.AugAssign)):
            targets = [inner.target]
        elif isinstance(inner, ast.Call):
            func = inner.func
            if isinstance(func, ast.Name) and func.id == "setattr" and inner.args:
                first = inner.args[0]
                if isinstance(first, ast.Name) and first.id == owner:
                    key = inner.args[1] if len(inner.args) > 1 else None
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        names.add(key.value)
                    else:
                        dynamic = True
            elif isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault") and _is_owner_dict(func.value, owner):
                dynamic = True
            elif isinstance(func, ast.Name):  # builtins are not in `scope`: nothing set
                handed = [i for i, arg in enumerate(inner.args) if isinstance(arg, ast.Name) and arg.id == owner]
                handed_by_name = [k.arg for k in inner.keywords if isinstance(k.value, ast.Name) and k.value.id == owner and k.arg]
                if handed or handed_by_name:
                    found, sets = _handed_to(func.id, handed, handed_by_name, scope, depth)
                    names |= found
                    dynamic = dynamic or sets
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name) and leaf.value.id == owner:
                    names.add(leaf.attr)
                elif isinstance(leaf, ast.Subscript) and _is_owner_dict(leaf.value, owner):
                    dynamic = True
    return names, dynamic


def _handed_to(name, positions, keywords, scope, depth):
    """What the function `name` of `scope` (a module's globals) may set on an object it
    is handed at `positions` / as `keywords`: a Python function is read from its source
    (one level deep); a C function may set any attribute (NumPy's
    ``finfo`` gets its constants so); a class builds its own object, and a name that is
    not the module's (a parameter, a local) is a callback: nothing set."""
    value = (scope or {}).get(name)
    if inspect.isbuiltin(value):
        return set(), True
    if inspect.isclass(value) and depth < 1:
        return set(), _sets_computed_names(value)
    if not inspect.isfunction(value) or depth >= 1:
        return set(), False
    node = _function_node(value)
    if node is None:
        return set(), True
    parameters = [a.arg for a in node.args.posonlyargs + node.args.args]
    owners = {parameters[i] for i in positions if i < len(parameters)}
    owners |= {k for k in keywords if k in parameters or k in [a.arg for a in node.args.kwonlyargs]}
    if len(owners) < len(positions) + len(keywords):  # *args / **kwargs take it
        return set(), _writes_attributes(node)
    names, dynamic = set(), False
    for owner in owners:
        found, sets = _owner_writes(node, owner, getattr(value, "__globals__", None), depth + 1)
        names |= found
        dynamic = dynamic or sets
    return names, dynamic


def _writes_attributes(function) -> bool:
    """Whether `function` may set an attribute of anything: a ``setattr`` call, an
    attribute assigned or deleted, or a ``__dict__`` named (pandas'
    ``get_unanimous_names(*indexes)`` only reads what it is handed)."""
    for inner in ast.walk(function):
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id in ("setattr", "delattr"):
            return True
        if isinstance(inner, ast.Attribute) and (isinstance(inner.ctx, (ast.Store, ast.Del)) or inner.attr == "__dict__"):
            return True
    return False


def _sets_computed_names(cls) -> bool:
    """Whether a Python class handed an object may set attributes of computed names on
    it: some method of its own calls ``setattr`` with a name that is not a literal on
    what it was handed or keeps (a parameter other than ``self``, or an attribute of
    ``self``: configparser's ConverterMapping gives its parser ``getdecimal`` so); an
    object the method makes itself (``new = self.copy(); setattr(new, name, ...)``, as
    pandas' ``DataFrame.to_timestamp``) is not the one handed."""
    node = _class_node(cls)
    if node is None:
        return False
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = method.args
        parameters = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
        parameters += [a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None]
        own = parameters[0] if parameters else None
        for inner in ast.walk(method):
            if not (
                isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "setattr"
                and len(inner.args) > 1 and not isinstance(inner.args[1], ast.Constant)
            ):
                continue
            target = inner.args[0]
            if isinstance(target, ast.Name) and target.id in parameters and target.id != own:
                return True
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == own:
                return True
    return False


def _function_node(function):
    """The ``def`` of a module-level Python function in its source file, or None."""
    code = getattr(function, "__code__", None)
    if code is None or "." in getattr(function, "__qualname__", "."):
        return None
    tree = _parsed_file(code.co_filename)
    if tree is None:
        return None
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function.__name__), None)


def _class_scope(cls):
    """The globals of the module that defines `cls` (its methods' ``__globals__``: NumPy
    sets ``__module__`` to ``numpy`` on classes defined elsewhere)."""
    method = _own_method(cls)
    if method is not None:
        return method.__globals__
    return getattr(sys.modules.get(cls.__module__), "__dict__", None)


def _own_method(cls):
    """The first Python function defined in the body of `cls` itself (a method, class or
    static method, or a property's getter), or None."""
    for value in vars(cls).values():
        function = getattr(value, "__func__", value)
        function = getattr(function, "fget", function)
        if inspect.isfunction(function) and function.__qualname__.startswith(cls.__qualname__ + "."):
            return function
    return None


#: methods that restore or copy attributes an instance already had (unpickling, copies):
#: what they set through ``setattr`` with a computed name is not a new attribute
_RESTORING = frozenset({"__setstate__", "__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__", "__getstate__"})


def _twin_node(cls):
    """For a class without Python source (a C class such as ``datetime.date``,
    ``collections.OrderedDict``, ``xml.etree.ElementTree.Element``): the ``ast.ClassDef``
    of the pure-Python class of the same name in the ``.py`` file of its module (the
    standard library keeps one for each such accelerated class), else None."""
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return None
    tree = _parsed_file(filename)
    if tree is None or "." in cls.__qualname__:
        return None
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__qualname__), None)
    # a twin has methods (a Python class without any is this class itself: its source
    # says nothing of what its instances are given elsewhere)
    if node is None or not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in node.body):
        return None
    return node


def _python_class_without_methods(cls) -> bool:
    """Whether `cls` was made by a ``class`` statement with no methods of its own (scipy's
    ``csr_matrix``: docstring and bases only): a heap type whose module's ``.py`` file
    defines it at top level without a function in its body.  A C class has no such
    statement (a C class whose pure-Python twin has methods is read through the twin)."""
    if not getattr(cls, "__flags__", 0) & (1 << 9) or "." in getattr(cls, "__qualname__", "."):
        return False
    module = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(module, "__file__", None)
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return False
    tree = _parsed_file(filename)
    if tree is None:
        return False
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__qualname__), None)
    return node is not None and not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(node))


_GETATTRO = []


def _type_slot(cls, offset):
    import ctypes

    return ctypes.c_void_p.from_address(id(cls) + offset).value


def _getattro_offset():
    """The offset of ``tp_getattro`` in a CPython type object, found by comparing types
    whose attribute lookup is known (None elsewhere, or when it cannot be told)."""
    if _GETATTRO:
        return _GETATTRO[0]
    found = None
    try:
        import ctypes

        if sys.implementation.name == "cpython":
            generic = (object, int, float, tuple, complex)
            custom = (type, types.ModuleType)

            class _Hook:
                def __getattr__(self, name):
                    return None

            class _Plain:
                pass

            step = ctypes.sizeof(ctypes.c_void_p)
            for offset in range(3 * step, 48 * step, step):
                base = _type_slot(object, offset)
                if not base or any(_type_slot(c, offset) != base for c in generic + (_Plain,)):
                    continue
                if any(_type_slot(c, offset) == base for c in custom + (_Hook,)):
                    continue
                found = offset
                break
    except Exception:
        found = None
    _GETATTRO.append(found)
    return found


def generic_attribute_lookup(cls) -> bool:
    """Whether the C class `cls` looks its instances' attributes up as ``object`` does
    (``PyObject_GenericGetAttr``): a ``__getattribute__`` slot wrapper in its namespace
    then says nothing dynamic (``datetime.date``, ``array.array`` list one)."""
    offset = _getattro_offset()
    if offset is None:
        return False
    try:
        return _type_slot(cls, offset) == _type_slot(object, offset)
    except Exception:
        return False


def _self_attributes(node, scope=None):
    """(names assigned as ``self.NAME`` in the methods of class `node` (`scope`: its
    module's globals), or on an instance a method makes (``new = cls(...)``;
    ``new.NAME = ...``), whether some attribute is set dynamically: see `_owner_writes`)."""
    names = set()
    dynamic = False

    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        owners = [method.args.args[0].arg] if method.args.args else []
        for inner in ast.walk(method):
            if isinstance(inner, ast.Assign) and isinstance(inner.value, ast.Call) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name):
                made = ast.unparse(inner.value.func)
                if made == node.name or _NEW_INSTANCE.match(made):
                    owners.append(inner.targets[0].id)
        for owner in owners:
            found, sets = _owner_writes(method, owner, scope)
            names |= found
            dynamic = dynamic or (sets and method.name not in _RESTORING)
    return names, dynamic


def is_instance_method(static) -> bool:
    """Whether a class attribute found by ``inspect.getattr_static`` is a method of the
    instances (a Python function or a C method descriptor): called on an instance it
    loses its first parameter."""
    return inspect.isfunction(static) or type(static).__name__ == "method_descriptor"


#: modules whose classes stand for values of other classes (``typing.IO``, what a stub
#: says ``ZipFile.open`` returns, is no base of the ``ZipExtFile`` it makes)
_STAND_IN_MODULES = frozenset({"typing", "typing_extensions"})


def instance_members(cls, deprecations=None) -> dict:
    """What an instance of `cls` has: name -> (kind, has_members), private names included.

    The names of ``dir(cls)`` (the whole MRO: methods, properties and other descriptors,
    class attributes, ``__slots__``), annotated class-level names (dataclass fields and
    the like), and the names the methods of `cls` and its bases assign as ``self.NAME``
    (found in their source).  An extra ``"*"`` entry (`ANY_ATTRIBUTE`) says that other
    attributes exist: ``("values", False)`` for a known data proxy (`VALUE_PROXIES`),
    ``("any", False)`` when a class of the MRO defines ``__getattr__`` or
    ``__getattribute__``, sets attributes dynamically, or keeps an instance ``__dict__``
    without Python source to read.  `deprecations`: as for `public_members`.
    """
    members = public_members(cls, private=True, placeholders=True, deprecations=deprecations)
    dynamic = None
    if inspect.isabstract(cls) or getattr(cls, "_is_protocol", False) or getattr(cls, "__module__", None) in _STAND_IN_MODULES:
        # no instance is of this class itself: a subclass has more, or a class that is
        # not even its subclass stands for (``typing.IO`` for ``zipfile.ZipExtFile``)
        dynamic = "any"
    for klass in cls.__mro__:
        if klass is object:
            continue
        namespace = vars(klass)
        proxy = False  # this class serves data: what it sets dynamically is that data
        for hook in ("__getattr__", "__getattribute__"):
            function = namespace.get(hook)
            if function is None:
                continue
            if type(function).__name__ == "wrapper_descriptor" and generic_attribute_lookup(klass):
                continue  # a C class that names the generic lookup: nothing dynamic
            key = (getattr(function, "__module__", None), getattr(function, "__qualname__", None))
            proxy = proxy or key in VALUE_PROXIES
            kind = "values" if key in VALUE_PROXIES else "any"
            if dynamic != "any":
                dynamic = kind
        for name in namespace.get("__annotations__", {}) or {}:
            if isinstance(name, str) and name.isidentifier():
                members.setdefault(name, ("instance", True))
        for name in getattr(klass, "__dataclass_fields__", {}) or {}:
            if isinstance(name, str) and name.isidentifier():
                members.setdefault(name, ("instance", True))
        node = _class_node(klass)
        if node is None and _own_method(klass) is None:
            node = _twin_node(klass)  # a C class: its pure-Python twin says what it sets
        if node is None and _python_class_without_methods(klass):
            continue  # its own body sets nothing on instances (its bases are read in turn)
        if node is None:
            if getattr(klass, "__dictoffset__", 0) and dynamic != "any":
                # instances keep a __dict__ that no source we can read fills (modules,
                # functions); the file objects of io are given data only
                dynamic = "values" if klass.__module__ in DATA_DICT_MODULES and dynamic != "any" else "any"
            continue
        names, sets_dynamically = _self_attributes(node, _class_scope(klass))
        if sets_dynamically and not proxy:
            dynamic = "any"
        for name in names:
            if name.isidentifier():
                members.setdefault(name, ("instance", True))
    if dynamic is not None:
        members[ANY_ATTRIBUTE] = (dynamic, False)
    return members


def _as_class(annotation):
    """The class an annotation names: a class, or the origin of a generic alias
    (``ndarray[Any, dtype[float64]]``, NumPy's ``NDArray[...]``); None for unions,
    ``Any``, type variables, ``None`` and the rest."""
    import typing

    if annotation is typing.Any or annotation is object or annotation is type(None):
        return None  # says nothing (Any is a class since Python 3.11)
    if inspect.isclass(annotation):
        return annotation
    origin = typing.get_origin(annotation)
    if inspect.isclass(origin) and origin not in (type, tuple):
        return origin
    return None


_RETURNS = re.compile(r"^Returns?\n-{3,}\n(.*?)(?=^\S[^\n]*\n-{3,}\n|\Z)", re.M | re.S)
_TYPE_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


def _docstring_class(obj):
    """The class a numpydoc "Returns" section names when it lists one value of one type
    (``out : ndarray``): the documentation of the installed version, read without
    calling anything.  None for several values, alternatives ("ndarray or scalar") or a
    name that does not resolve to a class."""
    try:
        doc = inspect.getdoc(obj) or ""
    except Exception:
        return None
    found = _RETURNS.search(doc)
    if found is None:
        return None
    entries = [line for line in found.group(1).splitlines() if line.strip() and not line[:1].isspace()]
    if len(entries) != 1:
        return None
    text = entries[0].split(" : ", 1)[-1] if " : " in entries[0] else entries[0]
    text = text.split(",", 1)[0].strip().strip("`")
    if not _TYPE_NAME.match(text) or text in ("None", "object"):
        return None
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    places = [module, sys.modules.get((getattr(module, "__name__", "") or "").split(".")[0])]
    for place in places:
        if place is None:
            continue
        value = place
        try:
            for part in text.split("."):
                value = getattr(value, part)
        except Exception:
            continue
        if inspect.isclass(value):
            return value
    return None


def result_class(obj):
    """The class of what calling `obj` returns, where one is known: a class gives its
    instances; a function its return annotation when that names one class (a generic
    alias counts as its origin: ``NDArray[float64]`` is an ndarray), else the one type
    its numpydoc "Returns" section names (C functions such as ``numpy.zeros``).  None
    otherwise (unions, ``Any``, several values, nothing said)."""
    if inspect.isclass(obj):
        # a metaclass with its own __call__ may return anything (Enum('Name', 'a b')
        # makes a class): only type.__call__ is known to make an instance
        return obj if type(obj).__call__ is type.__call__ else None
    alias = _as_class(obj)  # a generic alias such as ``NDArray[float64]`` names its origin
    if alias is not None and not callable(getattr(obj, "__wrapped__", None)):
        return alias
    annotation = inspect.Parameter.empty
    try:
        import typing

        annotation = typing.get_type_hints(obj).get("return", inspect.Parameter.empty)
    except Exception:
        try:
            annotation = inspect.signature(obj).return_annotation
        except Exception:
            pass
    if annotation is not inspect.Parameter.empty:
        return _as_class(annotation)  # an annotation that says "not one class" is final
    return _docstring_class(obj)


def dotted_path(path) -> str:
    """A path as `adaptrack_lsp.apis.index.dotted` writes it: ``a.b().c``."""
    text = ""
    for part in path:
        text += part if part == "()" or not text else "." + part
    return text


def _hinted_class(text, owner=None):
    """The class a type hint names (``"requests.models.Response"``: what jedi infers a
    call returns, from library code or stubs); where the call is a method of an
    instance of `owner` and the hint names a base class of `owner` (a stub's ``->
    Self`` read as the class that declares it), `owner` itself.  None when the name does
    not resolve to a class here."""
    if inspect.isclass(owner) and any(klass.__name__ == text.rsplit(".", 1)[-1] for klass in owner.__mro__[:-1]):
        return owner  # a base of the receiver's class, by name (stubs name C bases apart: io._IOBase)
    try:
        hinted = resolve(text.split("."))
    except Exception:
        return None
    if not inspect.isclass(hinted):
        return None
    if owner is not None and inspect.isclass(owner) and hinted is not owner and issubclass(owner, hinted):
        return owner
    return hinted


def made_exactly(obj, receiver_exact=True) -> bool:
    """Whether calling `obj` makes an instance of exactly the class `result_class`
    names: a class whose instances ``type.__call__`` makes and whose MRO defines no
    ``__new__`` in Python (``scipy.signal.lti.__new__`` returns a
    ``TransferFunctionContinuous``, one of its subclasses); a C function or method (its
    documented class: ``numpy.zeros``) where its receiver's class is exact
    (`receiver_exact`).  A Python function's or another callable's result is declared,
    not exact: an annotation or a docstring names a class whose subclasses qualify too
    (``numpy.expand_dims`` and the ufuncs give a MaskedArray back a MaskedArray)."""
    if inspect.isbuiltin(obj) or type(obj).__name__ == "method_descriptor":
        return receiver_exact
    if not inspect.isclass(obj) or type(obj).__call__ is not type.__call__:
        return False
    for klass in obj.__mro__:
        new = vars(klass).get("__new__")
        if new is not None and inspect.isfunction(getattr(new, "__func__", new)):
            return False
    return True


def resolve_value_type(path, hints=None, exactness=None):
    """The class of the value `path` names, for a path ending in ``"()"``: ``a.b()``
    is what calling ``a.b`` returns (`result_class`); a ``"()"`` further in continues on
    that class: ``("pandas", "read_csv", "()", "head", "()")`` is what the method
    ``head`` of that result returns.  `hints`: ``{dotted call: class path}`` for calls
    the runtime cannot type (`_hinted_class`; a hint for the whole path also stands
    for a step before it that is not known).  TypeError where a type is not known.
    `exactness`: a list that receives whether the value is an instance of exactly that
    class (`made_exactly` of the last call), not possibly of a subclass."""
    if not path or path[-1] != "()":
        raise TypeError("only a path ending in a call names an instance")
    hints = hints or {}
    final = hints.get(dotted_path(path[:-1]))
    first = path.index("()")
    callee = resolve(path[:first])
    cls = result_class(callee)
    exact = cls is not None and made_exactly(callee)
    if cls is None:
        cls = _hinted_class(hints[dotted_path(path[:first])]) if dotted_path(path[:first]) in hints else None
        if cls is None:
            hinted = _hinted_class(final) if final else None
            if hinted is not None:
                if exactness is not None:
                    exactness.append(False)
                return hinted
            raise TypeError("the type of what %s() returns is not known" % ".".join(path[:first]))
    position = first + 1
    while position < len(path):
        end = path.index("()", position)
        value = cls
        owner = cls
        for name in path[position:end]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = getattr(value, name)
        found = result_class(value)
        exact = found is not None and made_exactly(value, exact)
        if found is None:
            hint = hints.get(dotted_path(path[:end]))
            found = _hinted_class(hint, owner if end == position + 1 else None) if hint else None
        if found is None:
            hinted = _hinted_class(final) if final and end != len(path) - 1 else None
            if hinted is not None:
                if exactness is not None:
                    exactness.append(False)
                return hinted
            raise TypeError("the type of what %s() returns is not known" % ".".join(p for p in path[:end] if p != "()"))
        cls = found
        position = end + 1
    if exactness is not None:
        exactness.append(exact)
    return cls


#: most classes whose instance members `possible_instance_members` unites (more: any)
MAX_SUBCLASSES = 64
#: the root packages whose lazily served names `subclasses_of` loaded
_ROOTS_LOADED: set = set()
#: `instance_members` of the subclasses `possible_instance_members` read, by class
_SUBCLASS_MEMBERS: dict = {}


def subclasses_of(cls) -> list:
    """`cls` and the classes loaded here that derive from it (the root package's
    lazily served names loaded first: ``numpy.ma``'s MaskedArray derives from
    ``numpy.ndarray``)."""
    root = sys.modules.get((getattr(cls, "__module__", None) or "").split(".")[0])
    if isinstance(root, types.ModuleType) and not is_lazy_module(root) and root.__name__ not in _ROOTS_LOADED:
        _ROOTS_LOADED.add(root.__name__)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                names = [n for n in dir(root) if isinstance(n, str) and not n.startswith("_")]
            except Exception:
                names = []
            for name in names:
                try:
                    member_value(root, name)
                except Exception:
                    continue
    found, pending = [cls], [cls]
    while pending and len(found) <= MAX_SUBCLASSES:
        klass = pending.pop()
        try:
            below = type.__subclasses__(klass) if isinstance(klass, type) else []
        except Exception:
            below = []
        for sub in below:
            if sub not in found:
                found.append(sub)
                pending.append(sub)
    return found


def possible_instance_members(cls, exact, deprecations=None) -> dict:
    """`instance_members` of a value of class `cls`; where it may be of a subclass
    (not `exact`), what any loaded subclass's instances have too, and any attribute
    (``"*"``) past `MAX_SUBCLASSES` of them.  A use is reported only where no class
    the value may have offers the name."""
    members = instance_members(cls, deprecations)
    if exact:
        return members
    classes = subclasses_of(cls)
    if len(classes) > MAX_SUBCLASSES:
        members[ANY_ATTRIBUTE] = ("any", False)
        return members
    for klass in classes[1:]:
        more = _SUBCLASS_MEMBERS.get(klass)
        if more is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    more = instance_members(klass)
            except Exception:
                more = {ANY_ATTRIBUTE: ("any", False)}
            _SUBCLASS_MEMBERS[klass] = more
        for name, item in more.items():
            if name == ANY_ATTRIBUTE:
                if members.get(ANY_ATTRIBUTE, ("", False))[0] != "any":
                    members[ANY_ATTRIBUTE] = item
                continue
            members.setdefault(name, item)
    return members


# --------------------------------------------------------------------------- modules

#: import-system finders whose modules can be listed (any other finder on sys.meta_path
#: may serve names nobody can list: then the top-level names are unknown)
_LISTABLE_FINDERS = {
    "_frozen_importlib.BuiltinImporter",
    "_frozen_importlib.FrozenImporter",
    "_frozen_importlib_external.PathFinder",
    "_distutils_hack.DistutilsMetaFinder",  # setuptools' distutils shim: serves stdlib names
    "six._SixMetaPathImporter",  # six.moves.*: submodules of six, no top-level names
}


def _finder_name(finder) -> str:
    kind = finder if isinstance(finder, type) else type(finder)
    return "%s.%s" % (kind.__module__, kind.__qualname__)


def _directory_modules(folders) -> set:
    """Module names a folder offers: what ``pkgutil`` lists (modules, regular packages,
    extension modules) plus sub-folders with identifier names (namespace packages)."""
    import os
    import pkgutil

    names = {name for _, name, _ in pkgutil.iter_modules(list(folders))}
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.isidentifier() and os.path.isdir(os.path.join(folder, entry)):
                names.add(entry)
    return names


def frozen_modules() -> set:
    """The standard library's frozen modules (``_frozen_importlib``,
    ``_frozen_importlib_external``, ``zipimport``): compiled into the interpreter, in
    no folder of ``sys.path``."""
    try:
        import _imp
    except ImportError:
        return set()
    found = set()
    for name in getattr(sys, "stdlib_module_names", ()):
        try:
            if _imp.is_frozen(name):
                found.add(name)
        except Exception:
            continue
    return found


def importable_modules(path):
    """Module names importable right under `path`: top-level modules for ``[]``, the
    submodules of package `path` otherwise (listed from its folders, registered in
    ``sys.modules`` once it is imported, or bound as module attributes whose
    ``__name__`` says they are its children: ``os.path``, TensorFlow's ``compat.v1``).
    None when the list cannot be complete (an import finder that cannot be listed)."""
    if not path:
        names = set(sys.builtin_module_names) | _directory_modules(sys.path)
        for finder in sys.meta_path:
            name = _finder_name(finder)
            if name in _LISTABLE_FINDERS:
                continue
            mapping = getattr(finder, "MAPPING", None)  # setuptools' editable installs
            if isinstance(mapping, dict) and "_EditableFinder" in name:
                names.update(str(key) for key in mapping)
                continue
            return None
        names.update(frozen_modules())
        return sorted(n for n in names if n.isidentifier())
    module = resolve(path)
    if not isinstance(module, types.ModuleType):
        raise TypeError("%s is not a module" % ".".join(path))
    full = module.__name__
    names = set()
    folders = getattr(module, "__path__", None)
    if folders is not None:
        names |= _directory_modules(list(folders))
    prefix = ".".join(path) + "."
    for key in list(sys.modules):
        for base in (prefix, full + "."):
            if key.startswith(base) and "." not in key[len(base):]:
                names.add(key[len(base):])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in dir(module):
            try:
                value = inspect.getattr_static(module, name)
            except Exception:
                continue
            if isinstance(value, types.ModuleType) and getattr(value, "__name__", "") in (full + "." + name, prefix + name):
                names.add(name)
    return sorted(n for n in names if n.isidentifier())


# --------------------------------------------------------------------------- signatures

_NOTATION = {
    inspect.Parameter.VAR_POSITIONAL: "*",
    inspect.Parameter.VAR_KEYWORD: "**",
}


def signature_items(signature, bound=False):
    """`signature` (an ``inspect.Signature``) in Python's parameter notation, one list
    item per parameter plus the ``/`` and ``*`` markers; `bound` drops the first
    positional parameter (``self``)."""
    parameters = list(signature.parameters.values())
    if bound and parameters and parameters[0].kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        parameters = parameters[1:]
    items = []
    positional_only_open = False
    star_written = False
    for parameter in parameters:
        kind = parameter.kind
        if positional_only_open and kind != inspect.Parameter.POSITIONAL_ONLY:
            items.append("/")
            positional_only_open = False
        if kind == inspect.Parameter.POSITIONAL_ONLY:
            positional_only_open = True
            items.append(parameter.name)
        elif kind == inspect.Parameter.VAR_POSITIONAL:
            star_written = True
            items.append("*" + parameter.name)
        elif kind == inspect.Parameter.KEYWORD_ONLY:
            if not star_written:
                items.append("*")
                star_written = True
            items.append(parameter.name)
        else:
            items.append(_NOTATION.get(kind, "") + parameter.name)
    if positional_only_open:
        items.append("/")
    return items


def signature_of(obj, bound=False):
    """`signature_items` of `obj`, or None when it has none (or is not callable).
    Where ``inspect.signature`` (a C function's ``__text_signature__`` included) finds
    none, or one that takes ``**kwargs``, the signature line a C function's docstring
    starts with is used when it lists every parameter the other names and no
    ``**kwargs`` (`docstring_signature`: NumPy's ``a.mean(axis=None, dtype=None,
    out=None, *, keepdims=<no value>, where=<no value>)``)."""
    if isinstance(obj, types.ModuleType) or not callable(obj):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            signature = inspect.signature(obj)
    except Exception:
        signature = None
    items = signature_items(signature, bound) if signature is not None else None
    if items is not None and not any(item.startswith("**") for item in items):
        return items
    if not _without_python_source(obj):
        return items  # a Python function's **kwargs is what it takes
    if items is None and inspect.isclass(obj):
        twin = twin_signature(obj)
        if twin is not None:
            return twin
    written = docstring_signature(obj)
    if written is None:
        return items
    if written and written[0] in ("self", "cls", "$self") and (bound or items is None):
        written = written[1:]
        if written and written[0] == "/":
            written = written[1:]
    if any(item.startswith("*") and item != "*" for item in written):
        return items  # the docstring says *args / **kwargs too: nothing more is known
    if items is not None:
        named = {item for item in items if item not in ("/", "*") and not item.startswith("*")}
        if not named <= set(written):
            return items  # the docstring line disagrees with the runtime: keep the runtime's
        positional_only = items[: items.index("/")] if "/" in items else []
        if positional_only:
            rest = [item for item in written if item not in positional_only and item != "/"]
            written = positional_only + ["/"] + rest
    return written


def _without_python_source(obj) -> bool:
    """Whether `obj` is a C callable (a builtin function or method, a method descriptor,
    a class without Python code): only those document their parameters in a line."""
    target = getattr(obj, "__func__", obj)
    if inspect.isfunction(target):
        return False
    if inspect.isclass(target):
        return _own_method(target) is None
    return True


#: the signature line a C callable's docstring starts with: ``name(params)`` or
#: ``a.name(params)``, maybe ``-> result``
_SIGNATURE_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w+)\((.*)\)\s*(?:->.*)?$", re.S)
#: a numpydoc section heading (``See Also`` / ``--------``)
_NUMPYDOC_SECTION = re.compile(r"^[ \t]*[A-Z][A-Za-z ]+\n[ \t]*-{3,}[ \t]*$", re.M)
#: a default the docstring writes in angle brackets (``<no value>``)
_WRITTEN_DEFAULT = re.compile(r"<[^<>\n]*>")


def docstring_signature(obj):
    """The parameters the first line(s) of `obj`'s own docstring write as a call of
    `obj` (its own name), in `signature_items` notation; None when the docstring does
    not start so or the parameters are not Python (``D.pop(k[,d])``)."""
    try:
        doc = obj.__doc__
        name = obj.__name__
    except Exception:
        return None
    if not isinstance(doc, str) or not _NUMPYDOC_SECTION.search(doc):
        return None  # numpydoc only (other styles leave aliases unwritten: torch's axis= for dim=)
    lines = doc.strip().splitlines()
    text = ""
    for line in lines[:8]:
        text += (" " if text else "") + line.strip()
        if text.count("(") and text.count("(") == text.count(")"):
            break
    match = _SIGNATURE_LINE.match(text)
    if match is None or match.group(1) != name:
        return None
    parameters = _WRITTEN_DEFAULT.sub("None", match.group(2))
    try:
        function = ast.parse("def f(%s): pass" % parameters).body[0]
    except (SyntaxError, ValueError):
        return None
    return _argument_items(function.args)


def _argument_items(arguments):
    """An ``ast.arguments`` in `signature_items` notation."""
    items = [a.arg for a in arguments.posonlyargs] + (["/"] if arguments.posonlyargs else [])
    items += [a.arg for a in arguments.args]
    if arguments.vararg is not None:
        items.append("*" + arguments.vararg.arg)
    elif arguments.kwonlyargs:
        items.append("*")
    items += [a.arg for a in arguments.kwonlyargs]
    if arguments.kwarg is not None:
        items.append("**" + arguments.kwarg.arg)
    return items


def twin_signature(cls):
    """The parameters of a C class's constructor as its pure-Python twin declares them
    (``xml.etree.ElementTree.XMLParser``: ``(*, target=None, encoding=None)``; the standard
    library keeps the two alike), without the first; None without a twin that says."""
    node = _twin_node(cls)
    if node is None:
        return None
    for name in ("__init__", "__new__"):
        method = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if method is None:
            continue
        items = _argument_items(method.args)
        if not items or items[0] in ("/", "*") or items[0].startswith("*"):
            return None  # no first parameter to drop: not a plain method
        items = items[1:]
        if items[:1] == ["/"]:
            items = items[1:]
        return items
    return None


def resolve_call(path, hints=None):
    """(callable, bound) for a path whose ``"()"`` parts are calls: the value of the
    chain, where ``..., "()"`` stands for what the call returns (`resolve_value_type`,
    with `hints`) and the methods of such an instance are looked up on its class and
    lose their first parameter."""
    if "()" not in path:
        return resolve(path), False
    last = len(path) - 1 - list(reversed(path)).index("()")
    owner = resolve_value_type(list(path[: last + 1]), hints)
    bound = False
    for name in path[last + 1 :]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            static = inspect.getattr_static(owner, name)
            value = getattr(owner, name)
        bound = is_instance_method(static)  # a method of its instances
        owner = value
    return owner, bound


# --------------------------------------------------------------------------- walk


def distribution_version(package: str):
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    try:
        mapping = metadata.packages_distributions()
    except Exception:
        mapping = {}
    for dist_name in mapping.get(package, []) + [package]:
        try:
            return metadata.version(dist_name)
        except Exception:
            continue
    return None


def walk_package(package: str, max_depth: int = 8) -> dict:
    """Public API names of `package`, breadth first, as a snapshot dict.

    Modules are descended into only when they belong to the package's public API: for a
    package with generated API modules (``<package>._api``, TensorFlow) only those and
    the package itself, otherwise modules named ``<package>`` or ``<package>.*``.  Each
    module is walked once (by ``__name__``), and a module whose name component already
    occurs earlier in its path (``tf.compat.v1.compat``) is listed but not descended
    into: that is how ``compat.v1.compat.v2...`` loops are cut.  Members outside the
    package (``tf.compat.v1.app.flags`` is absl's) are listed, not descended into.
    """
    root = resolve([package])
    generated_prefix = package + "._api."
    # TensorFlow's generated API modules (tensorflow._api.v2...), not any package's
    # private `_api` helpers (matplotlib._api.deprecation)
    has_generated_api = any(re.match(re.escape(generated_prefix) + r"v\d", name) for name in list(sys.modules))
    # the public submodules a package does not import itself (its generated API, where
    # it has one, is all there is to walk)
    skipped_modules = {} if has_generated_api else import_submodules(root)

    def walkable(module) -> bool:
        name = getattr(module, "__name__", None)
        if not isinstance(name, str):
            return False
        if name == package:
            return True
        if has_generated_api:
            return name.startswith(generated_prefix)
        return name.startswith(package + ".")

    names: list = []
    kinds: dict = {}
    deprecated: dict = {}
    signatures: dict = {}
    class_paths: dict = {}
    returns: dict = {}
    found_classes: dict = {}  # defining class path -> class, in the order found
    visited = {root.__name__}
    queue = [((package,), root)]
    walked_modules = []
    while queue:
        next_queue = []
        for path, module in queue:
            walked_modules.append(".".join(path))
            deprecations = {}
            for name, (kind, _) in public_members(module, private=True, deprecations=deprecations, module_getattr=True).items():
                child_path = path + (name,)
                dotted = ".".join(child_path)
                names.append(dotted)
                kinds[dotted] = kind
                if name.startswith("_"):
                    continue  # a private name exists (`module.__name__`, `np._NoValue`); it is not described further
                if deprecations.get(name):
                    deprecated[dotted] = deprecations[name]
                if kind != "module":  # functions, classes, callable instances (numpy's ufuncs)
                    try:
                        value = member_value(module, name)
                        items = signature_of(value)
                    except Exception:
                        value = items = None
                    if items is not None:
                        signatures[dotted + "()"] = items
                    if kind == "class":
                        class_paths[dotted] = _remember_class(value, found_classes)
                    elif kind == "function":
                        made = _result_class_or_none(value)
                        if made is not None:
                            returns[dotted] = _remember_class(made, found_classes)
                if kind != "module" or len(child_path) - 1 >= max_depth or name in path:
                    continue
                try:
                    child = member_value(module, name)
                except Exception:
                    continue
                child_name = getattr(child, "__name__", None)
                if not walkable(child) or child_name in visited:
                    continue
                visited.add(child_name)
                next_queue.append((child_path, child))
        queue = next_queue
    classes = walk_classes(found_classes, signatures, returns)
    return {
        "package": package,
        "version": distribution_version(package) or getattr(root, "__version__", None),
        "root": package,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "max_depth": max_depth,
        "format": WALK_FORMAT,
        "names": sorted(names),
        "kinds": {name: kinds[name] for name in sorted(kinds)},
        "deprecated": {name: deprecated[name] for name in sorted(deprecated)},
        "signatures": {name: signatures[name] for name in sorted(signatures)},
        "classes": {path: classes[path] for path in sorted(classes)},
        "class_paths": {name: class_paths[name] for name in sorted(class_paths)},
        "returns": {name: returns[name] for name in sorted(returns)},
        "modules": sorted(walked_modules),
        "skipped_modules": {name: skipped_modules[name] for name in sorted(skipped_modules)},
    }


#: submodule names that are not API (test suites, scripts): not imported by the walk
NOT_API_MODULES = frozenset({"tests", "test", "conftest", "setup", "__main__"})
#: most submodules one walk imports, and the seconds it may spend importing them
MAX_SUBMODULES = 4000
SUBMODULES_BUDGET_S = 400.0


def import_submodules(package, limit=MAX_SUBMODULES, budget_s=SUBMODULES_BUDGET_S) -> dict:
    """Import every public submodule of `package` found on disk (``pkgutil`` over the
    installed files; names starting with ``_`` and test suites left out), so that the
    walk reaches modules the package does not import itself (``matplotlib.cm``).  The
    modules that fail to import: {dotted name: "ExceptionType: message"}."""
    import pkgutil
    import time

    failures = {}
    started = time.monotonic()
    count = 0
    stack = [package]
    while stack:
        current = stack.pop()
        folders = getattr(current, "__path__", None)
        if folders is None:
            continue
        try:
            found = sorted(pkgutil.iter_modules(list(folders)), key=lambda info: info.name)
        except Exception:
            continue
        for info in found:
            name = info.name
            if name.startswith("_") or name in NOT_API_MODULES or not name.isidentifier():
                continue
            full = "%s.%s" % (current.__name__, name)
            if count >= limit or time.monotonic() - started > budget_s:
                failures[full] = "not imported: the walk's limit of modules or time was reached"
                continue
            count += 1
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    child = importlib.import_module(full)
            except (Exception, SystemExit) as error:  # an optional dependency missing, another platform's module
                failures[full] = ("%s: %s" % (type(error).__name__, error)).strip()[:300]
                continue
            if info.ispkg and isinstance(child, types.ModuleType):
                stack.append(child)
    return failures


#: the snapshot format `walk_package` writes: 2 added instance members of classes
#: ("classes"), where public class names are defined ("class_paths"), the classes calls
#: return ("returns") and the signatures of methods called on instances; 3 added the
#: members that announce their deprecation ("deprecated", and per class); 4 imports
#: every public submodule and lists the modules walked ("modules") and those that do not
#: import ("skipped_modules"), and reads keyword names from numpydoc signature lines; 5
#: lists the private names of each module walked
WALK_FORMAT = 5
#: most classes one walk describes (a guard against packages that generate classes)
MAX_WALKED_CLASSES = 20000


def _remember_class(cls, found: dict) -> str:
    path = class_path(cls)
    found.setdefault(path, cls)
    return path


def _result_class_or_none(obj):
    try:
        made = result_class(obj)
    except Exception:
        return None
    return made if inspect.isclass(made) else None


def class_entry(cls, signatures: dict, returns: dict, found: dict) -> dict:
    """The snapshot entry of one class: ``{"members": {name: kind}, "dynamic": null |
    "any" | "values"}`` (`instance_members`; "dynamic" is the ``"*"`` entry's kind), and
    ``"deprecated": {name: message}`` where some member announces its deprecation.
    The signatures of its methods as called on an instance go into `signatures` under
    ``"<class path>().<name>()"``; the classes its methods return (single-class return
    annotations) into `returns` under ``"<class path>().<name>"`` and `found`."""
    path = class_path(cls)
    deprecations: dict = {}
    members = instance_members(cls, deprecations)
    dynamic = members.pop(ANY_ATTRIBUTE, (None, False))[0]
    for name, items in member_signatures(cls, members, bound=True).items():
        signatures["%s().%s()" % (path, name)] = items
    for name, (kind, _) in members.items():
        if kind != "function":
            continue
        try:
            value = member_value(cls, name)
        except Exception:
            continue
        made = _result_class_or_none(value)
        if made is not None:
            returns["%s().%s" % (path, name)] = _remember_class(made, found)
    entry = {"members": {name: members[name][0] for name in sorted(members)}, "dynamic": dynamic}
    if deprecations:
        entry["deprecated"] = {name: deprecations[name] for name in sorted(deprecations) if name in members}
    return entry


def walk_classes(found: dict, signatures: dict, returns: dict, limit: int = MAX_WALKED_CLASSES) -> dict:
    """`class_entry` of every class in `found` ({defining path: class}) and of the
    classes their methods return, at most `limit`; a class whose members cannot be read
    is left out (unknown)."""
    classes: dict = {}
    done: set = set()
    while len(done) < min(len(found), limit):
        for path, cls in list(found.items()):
            if path in done:
                continue
            done.add(path)
            if len(done) > limit:
                break
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    classes[path] = class_entry(cls, signatures, returns, found)
            except Exception:
                continue
    return classes


# --------------------------------------------------------------------------- serve


def member_table(members: dict, deprecations: dict) -> dict:
    """The ``members`` of an answer: name -> ``[kind, has_members]``, with the
    deprecation message as a third item for a deprecated member."""
    return {
        name: [kind, flag] + ([deprecations[name]] if deprecations.get(name) else [])
        for name, (kind, flag) in members.items()
    }


def handle(request: dict) -> dict:
    answer = {"id": request.get("id")}
    op = request.get("op")
    if op == "ping":
        answer["pong"] = True
        answer["python"] = "%d.%d.%d" % sys.version_info[:3]
        answer["limits"] = dict(LIMITS_IN_FORCE)
        return answer
    if op == "members":
        path = [str(part) for part in request.get("path") or []]
        if not path:
            answer.update(members=None, error="empty path")
            return answer
        try:
            deprecations = {}
            if path[-1] == "()":
                exactness: list = []
                cls = resolve_value_type(path, request.get("types"), exactness)
                members = possible_instance_members(cls, all(exactness), deprecations)
                answer["members"] = member_table(members, deprecations)
                answer["type"] = class_path(cls)
                if request.get("signatures"):
                    answer["signatures"] = member_signatures(cls, members, bound=True)
                return answer
            obj = resolve(path)
            extra = list(request.get("extra") or ())
            if inspect.isclass(obj):
                extra += metaclass_names(obj)
            members = public_members(obj, extra, bool(request.get("private")), deprecations=deprecations, module_getattr=True)
            if serves_any_name(obj):
                members[ANY_ATTRIBUTE] = ("any", False)
            answer["members"] = member_table(members, deprecations)
            if request.get("signatures"):
                answer["signatures"] = member_signatures(obj, members)
        except (Exception, SystemExit) as error:  # an import may even call sys.exit
            answer.update(members=None, error="%s: %s" % (type(error).__name__, error))
        return answer
    if op == "modules":
        path = [str(part) for part in request.get("path") or []]
        try:
            answer["modules"] = importable_modules(path)
            if answer["modules"] is None:
                answer["error"] = "an import finder on sys.meta_path cannot be listed"
        except (Exception, SystemExit) as error:
            answer.update(modules=None, error="%s: %s" % (type(error).__name__, error))
        return answer
    if op == "signature":
        path = [str(part) for part in request.get("path") or []]
        try:
            obj, bound = resolve_call(path, request.get("types"))
            answer["signature"] = signature_of(obj, bound)
            if answer["signature"] is None:
                answer["error"] = "no signature"
        except (Exception, SystemExit) as error:
            answer.update(signature=None, error="%s: %s" % (type(error).__name__, error))
        return answer
    answer["error"] = "unknown op %r" % (op,)
    return answer


def serve(stdin, stdout) -> None:
    for line in stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError as error:
            request = None
            answer = {"id": None, "error": "bad request: %s" % error}
        if request is not None:
            answer = handle(request)
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


LIMITS_IN_FORCE = {}


def apply_limits(spec):
    """Set this process's resource limits from ``name=value,...`` (soft and hard).

    Returns {name: value} of the limits that were set; a limit the platform refuses
    (no ``resource`` module on Windows, RLIMIT_AS on some macOS versions) is left out.
    A limit above the current hard limit is lowered to it."""
    try:
        import resource
    except ImportError:
        return {}
    names = {"as": "RLIMIT_AS", "cpu": "RLIMIT_CPU", "fsize": "RLIMIT_FSIZE", "core": "RLIMIT_CORE"}
    applied = {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        constant = getattr(resource, names.get(key.strip(), ""), None)
        if constant is None:
            continue
        limit = int(value)
        _, hard = resource.getrlimit(constant)
        if hard != resource.RLIM_INFINITY and limit > hard:
            limit = hard
        try:
            resource.setrlimit(constant, (limit, limit))
        except (ValueError, OSError):
            continue
        applied[key.strip()] = limit
    return applied


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="runtime API introspection")
    parser.add_argument("--serve", action="store_true")
    parser.add_argument("--walk", metavar="PACKAGE")
    parser.add_argument("--max-depth", type=int, default=8)
    parser.add_argument("--limits", default="", help="as=BYTES,cpu=SECONDS,fsize=BYTES,core=0")
    args = parser.parse_args(argv)
    LIMITS_IN_FORCE.update(apply_limits(args.limits))
    # Libraries print to stdout on import (e.g. banners): keep the protocol channel clean.
    protocol_out = sys.stdout
    sys.stdout = sys.stderr
    if args.walk:
        try:
            snapshot = walk_package(args.walk, args.max_depth)
        except ImportError as error:
            sys.stderr.write("cannot import %s: %s\n" % (args.walk, error))
            return 1
        protocol_out.write(json.dumps(snapshot))
        protocol_out.write("\n")
        protocol_out.flush()
        return 0
    if args.serve:
        serve(sys.stdin, protocol_out)
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
