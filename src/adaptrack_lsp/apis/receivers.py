"""Typed receivers: the names a document binds to values whose type an API index can
name, as seen from the cursor.

`receivers_at(analysis, offset, roots)` reads the document's tree (`apis.document`;
`receiver_bindings(text, ...)` for a caller with only the text) and returns name -> expression path ending in `CALL` ("the value this call returns";
`apis.index`), for the names visible at the cursor whose every binding in their scope
gives the same such path:

- ``a = np.zeros(3)`` -> ``("numpy", "zeros", "()")``; ``df = pd.read_csv(f).head()``
  -> ``("pandas", "read_csv", "()", "head", "()")``; ``m = LinearRegression()`` after
  ``from sklearn.linear_model import LinearRegression`` -> the class's path and "()";
- an annotation, ``x: np.ndarray = ...`` or a parameter ``def f(a: np.ndarray)``,
  -> ``("numpy", "ndarray", "()")`` (an instance of the class; a subscripted
  annotation, ``npt.NDArray[np.float64]``, names its origin);
- ``b = a.copy()`` where ``a`` is itself such a name -> a's path + ``("copy", "()")``.

What the path's value has is the index's business (`APIIndex.members` of a path
ending in `CALL`): this module only reads the document.  A name is left out (unknown:
never constrained) when any of its bindings in the scope is something else — a
parameter without annotation, a ``for``/``with``/``except`` target, a tuple target, a
``del``, an import, a definition, a walrus, a string annotation, a call of something
unresolved — or when two bindings disagree.  Scopes follow Python: the innermost
function that binds the name, then enclosing functions, then the module (class bodies
are not visible from their methods; ``global``/``nonlocal`` defer outward).  Python
is not statically typed: this gives the type a reader would take for granted, and the
checks treat anything it cannot name as unknown.
"""

from __future__ import annotations

import builtins
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from adaptrack_lsp.apis.document import DocumentAnalysis, analysis_of
from adaptrack_lsp.apis.document import parser as _parser
from adaptrack_lsp.apis.index import CALL

log = logging.getLogger(__name__)

__all__ = ["AssignedNames", "assigned_attribute_names", "assigned_names", "attribute_names", "receiver_bindings", "receivers_at", "self_paths"]

#: a binding that names no typed value (makes its name unknown in its scope)
_UNTYPED = None
#: how an import binds a name (untyped too, but `DocumentScopes.bound_otherwise` tells it apart)
_IMPORTED = "import"
#: a class the document defines (its name is not a typed value; its methods' ``self`` is)
_CLASS = "class"
#: ``with value as name``: what ``value.__enter__()`` returns
_WITH = "with"
#: the first parameter of a method (``self``) / of a classmethod (``cls``)
_SELF = "self"
_CLS = "cls"
#: the attribute a ``with`` binding's value is entered through
ENTER = "__enter__"
#: class decorators that add no attributes a check could miss (dunder methods, fields
#: already written as annotations)
_PLAIN_CLASS_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass", "total_ordering", "functools.total_ordering", "unique", "enum.unique", "final", "typing.final"})
#: a class whose instances may take attributes no source names: ``setattr`` with a
#: computed name, its ``__dict__`` written, ``__getattr__``
_DYNAMIC_CLASS = re.compile(r"setattr\(\s*(?:self|cls)\s*,\s*[^'\"\s]|__dict__|\bvars\(\s*(?:self|cls)\s*\)|def\s+__getattr(?:ibute)?__")
_MAX_DEPTH = 8


def _text(node) -> str:
    return node.text.decode("utf-8", "replace")


class _Scope:
    """The bindings one scope makes: name -> list of value nodes (None: untyped)."""

    def __init__(self, node, kind: str):
        self.node = node
        self.kind = kind  # "module" or "function"
        self.bindings: dict[str, list] = {}
        self.deferred: set[str] = set()  # global / nonlocal names
        #: the names with a binding that may give a type (a value, an annotation, self,
        #: a ``with`` target): where a name's scope has none, it has no type
        self.typable: set[str] = set()

    def bind(self, name: str, value) -> None:
        self.bindings.setdefault(name, []).append(value)
        if value is not _UNTYPED and value[0] not in (_IMPORTED, _CLASS):
            self.typable.add(name)


def _targets(node, scope: _Scope) -> None:
    """Bind every identifier inside a target (tuple/list targets, starred) as untyped
    (``obj.x = ...`` and ``obj[k] = ...`` bind no name)."""
    if node.type in ("attribute", "subscript"):
        return
    if node.type == "identifier":
        scope.bind(_text(node), _UNTYPED)
        return
    for child in node.children:
        if child.type in ("identifier", "pattern_list", "tuple_pattern", "list_pattern", "list_splat_pattern", "as_pattern_target", "tuple", "list", "parenthesized_expression"):
            _targets(child, scope)


def _collect(node, scope: _Scope) -> None:
    """Record the bindings the statements under `node` make in `scope` (nested
    functions, classes, lambdas and comprehensions have their own scopes)."""
    for child in node.children:
        kind = child.type
        if kind in ("function_definition", "class_definition"):
            name = child.child_by_field_name("name")
            if name is not None:
                scope.bind(_text(name), (_CLASS, child) if kind == "class_definition" else _UNTYPED)
            continue
        if kind == "decorated_definition":
            definition = child.child_by_field_name("definition")
            name = definition.child_by_field_name("name") if definition is not None else None
            if name is not None:
                is_class = definition.type == "class_definition"
                scope.bind(_text(name), (_CLASS, definition) if is_class else _UNTYPED)
            continue
        if kind in ("lambda", "list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"):
            continue
        if kind == "assignment":
            _assignment(child, scope)
            continue
        if kind in ("global_statement", "nonlocal_statement"):
            scope.deferred.update(_text(n) for n in child.children if n.type == "identifier")
            continue
        if kind in ("import_statement", "import_from_statement"):
            for name in child.children_by_field_name("name"):
                alias = name.child_by_field_name("alias") if name.type == "aliased_import" else None
                if alias is not None:
                    scope.bind(_text(alias), (_IMPORTED, child))
                elif name.type == "dotted_name" and name.children:
                    scope.bind(_text(name.children[0]), (_IMPORTED, child))
            continue
        if kind == "for_statement" or kind == "for_in_clause":
            left = child.child_by_field_name("left")
            if left is not None:
                _targets(left, scope)
        elif kind == "as_pattern":
            alias = child.child_by_field_name("alias")
            value = child.named_children[0] if child.named_children else None
            target = alias.named_children[0] if alias is not None and alias.named_child_count == 1 else None
            if (
                target is not None and target.type == "identifier" and value is not None and value != alias
                and child.parent is not None and child.parent.type == "with_item" and not _is_async_with(child)
            ):
                scope.bind(_text(target), (_WITH, value))  # what value.__enter__() returns
            elif alias is not None:
                _targets(alias, scope)
        elif kind == "named_expression":
            name = child.child_by_field_name("name")
            if name is not None:
                scope.bind(_text(name), _UNTYPED)
        elif kind == "delete_statement":
            _targets(child, scope)
        elif kind == "augmented_assignment":
            pass  # `a += x` keeps what `a` is (an array stays an array)
        _collect(child, scope)


def _assignment(node, scope: _Scope) -> None:
    left = node.child_by_field_name("left")
    right = node.child_by_field_name("right")
    annotation = node.child_by_field_name("type")
    if left is None:
        return
    if left.type != "identifier":
        _targets(left, scope)
    elif annotation is not None:
        scope.bind(_text(left), ("annotation", annotation))
    elif right is not None and right.type == "assignment":  # a = b = value
        inner = right
        while inner is not None and inner.type == "assignment":
            value = inner.child_by_field_name("right")
            if value is None or value.type != "assignment":
                break
            inner = value
        value = inner.child_by_field_name("right") if inner is not None else None
        scope.bind(_text(left), ("value", value) if value is not None else _UNTYPED)
    else:
        scope.bind(_text(left), ("value", right) if right is not None else _UNTYPED)
    if right is not None:
        if right.type == "assignment":
            _assignment(right, scope)
        else:
            _collect(right, scope)


def _method_of(function):
    """(the class `function` is a method of, "self" / "cls" / None for a static
    method), or None for a function that is not defined directly in a class body."""
    node = function.parent
    decorators = []
    if node is not None and node.type == "decorated_definition":
        decorators = [_text(d).lstrip("@").strip() for d in node.children if d.type == "decorator"]
        node = node.parent
    if node is None or node.type != "block" or node.parent is None or node.parent.type != "class_definition":
        return None
    if "staticmethod" in decorators or not all(_keeps_method(d) for d in decorators):
        return node.parent, None  # a decorator that may make it something else: its first parameter is not known
    return node.parent, (_CLS if "classmethod" in decorators else _SELF)


#: decorators that leave a method a method of the class (its first parameter the instance)
_METHOD_DECORATORS = frozenset({
    "classmethod", "property", "cached_property", "functools.cached_property", "abstractmethod", "abc.abstractmethod",
    "override", "typing.override", "overload", "typing.overload", "final", "typing.final",
})
#: prefixes of the test frameworks' decorators that skip, mark or patch a test method
_METHOD_DECORATOR_PREFIXES = ("unittest.", "skip", "expectedFailure", "pytest.mark.", "mark.", "support.", "mock.patch", "patch")


def _keeps_method(decorator: str) -> bool:
    """Whether a decorator (``@`` text) leaves the function a method of the class: a
    known one, a property's ``.setter``, a test framework's skip or mark; another may
    hand the function something else first (test_sys_settrace's ``@jump_test(...)``
    gives ``output``, a list)."""
    name = decorator.split("(", 1)[0].strip()
    if name in _METHOD_DECORATORS or name.endswith((".setter", ".getter", ".deleter")):
        return True
    return name.startswith(_METHOD_DECORATOR_PREFIXES)


def _is_async_with(node) -> bool:
    while node is not None and node.type != "with_statement":
        node = node.parent
    return node is not None and any(child.type == "async" for child in node.children)


def _parameters(function, scope: _Scope) -> None:
    parameters = function.child_by_field_name("parameters")
    if parameters is None:
        return
    method = _method_of(function) if function.type == "function_definition" else None
    first = True
    for parameter in parameters.children:
        kind = parameter.type
        if kind in ("(", ")", ","):
            continue
        if first and method is not None and method[1] is not None and kind == "identifier":
            scope.bind(_text(parameter), (method[1], method[0]))  # self / cls of a method
            first = False
            continue
        first = False
        if kind == "identifier":
            scope.bind(_text(parameter), _UNTYPED)
        elif kind in ("typed_parameter", "typed_default_parameter"):
            annotation = parameter.child_by_field_name("type")
            name = parameter.child_by_field_name("name")
            if name is None:
                name = next((c for c in parameter.children if c.type == "identifier"), None)
            if name is not None:
                scope.bind(_text(name), ("annotation", annotation) if annotation is not None else _UNTYPED)
            elif parameter.children and parameter.children[0].type in ("list_splat_pattern", "dictionary_splat_pattern"):
                _targets(parameter.children[0], scope)
        elif kind == "default_parameter":
            name = parameter.child_by_field_name("name")
            if name is not None:
                scope.bind(_text(name), _UNTYPED)
        elif kind in ("list_splat_pattern", "dictionary_splat_pattern"):
            _targets(parameter, scope)


_LAMBDA_PARAMETERS = re.compile(r"\blambda\b([^:]*):")
_FOR_TARGETS = re.compile(r"\bfor\b(.*?)\bin\b")
_NAME = re.compile(r"[A-Za-z_]\w*")
_COMPREHENSIONS = frozenset({"list_comprehension", "set_comprehension", "dictionary_comprehension", "generator_expression"})


def _column(source: bytes, node) -> int:
    return node.start_point[1]


def _encloses(source: bytes, node, byte_offset: int) -> bool:
    """Whether the cursor at `byte_offset` is inside the body of the definition `node`:
    within its bytes, or after them on lines indented deeper than its header (the text
    being typed, which the parse leaves outside: ``def f(a):\n    return ‸``)."""
    if node.start_byte >= byte_offset:
        return False
    if byte_offset <= node.end_byte:
        return True
    following = node.next_named_sibling
    if following is not None and following.start_byte < byte_offset and following.type != "ERROR":
        return False  # another statement of the same block starts between it and the cursor
    body = node.child_by_field_name("body")
    if body is not None and body.named_child_count == 0 and not source[node.end_byte : byte_offset].strip():
        return True  # a header whose body is still to be written: the cursor begins it
    column = _column(source, node)
    lines = source[node.end_byte:byte_offset].split(b"\n")
    if len(lines) < 2:
        return True  # the cursor is on the definition's last line
    for line in lines[1:]:
        stripped = line.lstrip(b" \t")
        if not stripped and line is not lines[-1]:
            continue
        if len(line) - len(stripped) <= column:
            return False
    return True


_DEFINITIONS = ("function_definition", "class_definition")
#: where a definition may lie, below the module
_HOLDS_DEFINITIONS = frozenset(
    (*_DEFINITIONS, "decorated_definition", "block", "if_statement", "for_statement", "while_statement", "try_statement",
     "with_statement", "else_clause", "elif_clause", "except_clause", "finally_clause", "match_statement", "case_clause",
     "ERROR")
)


def _definitions(node, byte_offset: int, found: list) -> None:
    """The definitions below `node` that may enclose the cursor at `byte_offset` (a
    superset of those `_encloses` accepts), in no particular order.  A child that
    starts before the cursor and ends before it is closed (with every definition inside
    it) by its next named sibling, comments aside, when that is a statement on a later
    line, before the cursor, indented no deeper than the child: `_encloses` meets that
    line between the definition and the cursor.  So a document's other functions are
    never walked into.  (``ERROR`` nodes, whose columns say nothing, are always.)"""
    following = None  # the next named sibling, comments aside, of the child at hand
    for child in reversed(node.children):
        if child.start_byte < byte_offset and (
            child.end_byte >= byte_offset
            or following is None
            or following.start_byte >= byte_offset
            or following.type == "ERROR"
            or child.type == "ERROR"
            or following.start_point[0] <= child.end_point[0]
            or following.start_point[1] > child.start_point[1]
        ):
            kind = child.type
            if kind in _DEFINITIONS:
                found.append(child)
            if kind in _HOLDS_DEFINITIONS:
                _definitions(child, byte_offset, found)
        if child.is_named and child.type != "comment":
            following = child


def _collected_module(tree) -> _Scope:
    """The bindings the module makes (every statement outside functions and classes)."""
    module = _Scope(tree.root_node, "module")
    _collect(tree.root_node, module)
    return module


def _scopes(tree, source: bytes, byte_offset: int, module: _Scope) -> list[_Scope]:
    """The scopes visible at `byte_offset`, innermost first: comprehensions and lambdas
    (their variables, untyped), functions, the class body the cursor is directly in,
    then `module`."""
    scopes = []
    node = tree.root_node.descendant_for_byte_range(byte_offset, byte_offset)
    while node is not None and node.type != "module":
        kind = node.type
        if kind in _COMPREHENSIONS:
            scope = _Scope(node, "function")
            for clause in node.children:
                if clause.type == "for_in_clause":
                    left = clause.child_by_field_name("left")
                    if left is not None:
                        _targets(left, scope)
            scopes.append(scope)
        elif kind == "lambda" and node.start_byte < byte_offset:
            scope = _Scope(node, "function")
            parameters = node.child_by_field_name("parameters")
            if parameters is not None:
                _targets(parameters, scope)
                for parameter in parameters.children:
                    name = parameter.child_by_field_name("name")
                    if name is not None:
                        scope.bind(_text(name), _UNTYPED)
            scopes.append(scope)
        node = node.parent
    # the statement being typed may not parse: names a lambda or a comprehension on the
    # cursor's line binds are unknown there whatever the parse says
    line = source[source.rfind(b"\n", 0, byte_offset) + 1 : byte_offset].decode("utf-8", "replace")
    local = _Scope(tree.root_node, "function")
    for parameters in _LAMBDA_PARAMETERS.findall(line):
        for name in _NAME.findall(parameters):
            local.bind(name, _UNTYPED)
    for targets in _FOR_TARGETS.findall(line):
        for name in _NAME.findall(targets):
            local.bind(name, _UNTYPED)
    if local.bindings:
        scopes.append(local)
    definitions: list = []
    _definitions(tree.root_node, byte_offset, definitions)
    enclosing = sorted((d for d in definitions if _encloses(source, d, byte_offset)), key=lambda d: d.start_byte, reverse=True)
    innermost = True
    for definition in enclosing:
        body = definition.child_by_field_name("body")
        if definition.type == "function_definition":
            scope = _Scope(definition, "function")
            _parameters(definition, scope)
            if body is not None:
                _collect(body, scope)
            scopes.append(scope)
        elif innermost and body is not None:  # a class body is visible only directly in it
            scope = _Scope(definition, "class")
            _collect(body, scope)
            scopes.append(scope)
        innermost = False
    scopes.append(module)
    return scopes


#: builtin classes whose call makes an instance of the class itself (``type(x)`` and
#: ``super()`` do not)
_BUILTIN_CLASSES = frozenset(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and not name.startswith("_") and name not in ("type", "super", "object")
)
#: builtin names whose call has a type the index can tell: the classes, and ``sorted``
_BUILTIN_RESULTS = _BUILTIN_CLASSES | {"sorted"}
#: literals and displays -> the builtin class of their value (numbers are left out: ``x
#: = 0; x += 0.5`` changes what ``x`` is)
_LITERALS = {
    "list": "list", "list_comprehension": "list", "dictionary": "dict", "dictionary_comprehension": "dict",
    "set": "set", "set_comprehension": "set", "tuple": "tuple",
}
#: ``open(file, mode)``: the class of the file object for a mode written as a literal
_OPEN_CLASSES = (("+", "BufferedRandom"), ("r", "BufferedReader"))


def literal_path(node) -> tuple[str, ...] | None:
    """The typed path of a literal or display (``"a"`` -> ``("builtins", "str", CALL)``,
    ``b"a"`` bytes, ``[]`` list, ``{}`` dict, comprehensions), else None."""
    kind = node.type
    if kind in ("string", "concatenated_string"):
        first = node if kind == "string" else (node.named_children[0] if node.named_children else None)
        start = first.children[0] if first is not None and first.children else None
        prefix = _text(start).lower() if start is not None and start.type == "string_start" else ""
        return ("builtins", "bytes" if "b" in prefix else "str", CALL)
    name = _LITERALS.get(kind)
    return ("builtins", name, CALL) if name else None


def open_path(call) -> tuple[str, ...] | None:
    """What ``open(file, mode, buffering, ...)`` returns, where the mode is a literal
    (none: ``"r"``): ``io.TextIOWrapper`` for text, ``io.BufferedReader`` /
    ``BufferedWriter`` / ``BufferedRandom`` for binary; None for a mode that is not
    written out or unbuffered binary (``buffering=0``: a ``FileIO``)."""
    arguments = call.child_by_field_name("arguments")
    if arguments is None or arguments.type != "argument_list":
        return None
    positional = [child for child in arguments.named_children if child.type not in ("keyword_argument", "comment")]
    keywords = {}
    for child in arguments.named_children:
        if child.type == "keyword_argument":
            name, value = child.child_by_field_name("name"), child.child_by_field_name("value")
            if name is not None and value is not None:
                keywords[_text(name)] = value
        elif child.type in ("list_splat", "dictionary_splat"):
            return None
    mode = keywords.get("mode", positional[1] if len(positional) > 1 else None)
    buffering = keywords.get("buffering", positional[2] if len(positional) > 2 else None)
    if mode is None:
        text = "r"
    elif mode.type == "string" and not any(child.type == "interpolation" for child in mode.children):
        text = "".join(_text(child) for child in mode.children if child.type == "string_content")
    else:
        return None
    if "b" not in text:
        return ("io", "TextIOWrapper", CALL)
    if buffering is not None and _text(buffering).strip() == "0":
        return None
    for marker, name in _OPEN_CLASSES:
        if marker in text:
            return ("io", name, CALL)
    return ("io", "BufferedWriter", CALL)


_STAR_IMPORT = re.compile(rb"import\s+\*")  # a literal first: found at C speed (a leading \b is not)


def _star_import(source: bytes) -> bool:
    """Whether the source has ``import *`` (``import`` a word of its own)."""
    for match in _STAR_IMPORT.finditer(source):
        before = source[match.start() - 1 : match.start()]
        if not (before.isalnum() or before == b"_" or before >= b"\x80"):
            return True
    return False


#: answers kept per text (offsets of the cursor, sets of roots)
_ANSWERS_KEPT = 256
_UNREAD = object()


class _DocumentFacts:
    """What a whole document says about names: every name it binds somewhere (a builtin
    of that name may be shadowed), whether it star-imports (anything may be shadowed),
    and the functions it defines (a subclass's method may give a name another meaning)."""

    def __init__(self, tree, source: bytes):
        self.tree = tree
        self.source = source
        self.star_import = _star_import(source)
        self._module: _Scope | None = None
        self._answers: dict = {}
        self._bound: frozenset[str] | None = None
        self._bound_not_imported: frozenset[str] = frozenset()
        self._may_define: dict[str, bool] = {}
        #: (roots, class start, class end) -> the class's one library base (`_Resolver.class_base`)
        self.class_bases: dict[tuple, tuple[str, ...] | None] = {}

    def answer(self, key, read: Callable[[], Any]) -> Any:
        """What `read()` answers, kept with the text's facts under `key` (the typed
        receivers at an offset, the typed ``self``, the assigned names: each a function
        of the text and the roots, asked again by the parts of one request)."""
        found = self._answers.get(key, _UNREAD)
        if found is _UNREAD:
            found = read()
            if len(self._answers) >= _ANSWERS_KEPT:
                self._answers.clear()  # (one step: another thread may be reading them)
            self._answers[key] = found
        return found

    @property
    def module(self) -> _Scope:
        """The module's bindings, read on first use: the typed receivers at every cursor
        and the typed ``self`` of the document's classes share them (the part of a
        keystroke's reading that grows with the document)."""
        if self._module is None:
            self._module = _collected_module(self.tree)
        return self._module

    def may_define(self, name: str) -> bool:
        """Whether the document defines a function or method `name` somewhere (``def
        name(``): a method of one of its classes may override a library method of that
        name, so what calling it returns is not the library's."""
        found = self._may_define.get(name)
        if found is None:
            found = False
            if name.encode() in self.source:
                # a literal first: the search runs at C speed
                for match in re.finditer(re.escape(name.encode()) + rb"\s*\(", self.source):
                    before = self.source[max(0, match.start() - 1) : match.start()]
                    if before and (before.isalnum() or before == b"_"):
                        continue
                    line_start = self.source.rfind(b"\n", 0, match.start()) + 1
                    if re.fullmatch(rb"\s*(async\s+)?def\s+", self.source[line_start : match.start()]):
                        found = True
                        break
            self._may_define[name] = found
        return found

    @property
    def bound(self) -> frozenset[str]:
        """Every name the document binds in some scope (read on first use)."""
        global _BOUND_QUERY
        if self._bound is None:
            from tree_sitter import Query, QueryCursor

            if _BOUND_QUERY is None:
                _BOUND_QUERY = Query(_parser().language, _BOUND_PATTERNS)
            captures = QueryCursor(_BOUND_QUERY).captures(self.tree.root_node)
            bound = {_text(node) for node in captures.get("name", [])}
            for node in captures.get("target", []):  # tuple targets, nested: every identifier in them
                stack = [node]
                while stack:
                    inner = stack.pop()
                    if inner.type == "identifier":
                        bound.add(_text(inner))
                    elif inner.type not in ("attribute", "subscript"):
                        stack.extend(inner.children)
            self._bound_not_imported = frozenset(bound)
            self._bound = frozenset(bound | {_text(node) for node in captures.get("imported", [])})
        return self._bound

    @property
    def bound_not_imported(self) -> frozenset[str]:
        """Every name the document binds in some scope other than by an import statement
        (a superset of what the scopes' analysis counts: `DocumentScopes.bound_otherwise`
        asks it first)."""
        self.bound  # noqa: B018 - computes both sets
        return self._bound_not_imported

#: where a document binds names (any scope): what may shadow a builtin
_BOUND_PATTERNS = """
(assignment left: (identifier) @name)
(assignment left: [(pattern_list) (tuple_pattern) (list_pattern)] @target)
(augmented_assignment left: (identifier) @name)
(for_statement left: (_) @target)
(for_in_clause left: (_) @target)
(function_definition name: (identifier) @name)
(class_definition name: (identifier) @name)
(parameters (identifier) @name)
(parameters (_ (identifier) @name))
(lambda_parameters (identifier) @name)
(lambda_parameters (_ (identifier) @name))
(as_pattern_target) @target
(named_expression name: (identifier) @name)
(aliased_import alias: (identifier) @imported)
(import_statement name: (dotted_name . (identifier) @imported))
(import_from_statement name: (dotted_name . (identifier) @imported))
(global_statement (identifier) @name)
(nonlocal_statement (identifier) @name)
(delete_statement (_) @target)
(case_pattern (_) @target)
"""
_BOUND_QUERY = None


_FACTS: dict[bytes, _DocumentFacts] = {}


def document_facts(tree, source: bytes) -> _DocumentFacts:
    """`_DocumentFacts` of a parsed document (the last few documents are kept)."""
    found = _FACTS.get(source)
    if found is not None:
        return found
    facts = _DocumentFacts(tree, source)
    if len(_FACTS) >= 4:
        _FACTS.pop(next(iter(_FACTS)))
    _FACTS[source] = facts
    return facts


class _Resolver:
    def __init__(self, scopes: list[_Scope], roots: Mapping[str, tuple[str, ...]], facts: _DocumentFacts | None = None):
        self.scopes = scopes
        self.roots = roots
        self.facts = facts
        self.active: set[tuple[str, int]] = set()
        self.memo: dict[tuple[str, int], tuple[str, ...] | None] = {}
        # a class's base is the same from every cursor: kept with the document's facts
        self.class_memo: dict[tuple, tuple[str, ...] | None] = facts.class_bases if facts is not None else {}
        self.roots_key = tuple(sorted(roots.items()))

    def name(self, name: str, start: int = 0) -> tuple[str, ...] | None:
        """The typed path of `name` looked up from scope `start` outward (None: unknown)."""
        for index in range(start, len(self.scopes)):
            scope = self.scopes[index]
            if name in scope.deferred:
                continue
            values = scope.bindings.get(name)
            if values is None:
                continue
            key = (name, index)
            if key in self.memo:
                return self.memo[key]
            if key in self.active:
                return None  # a = a.copy(): circular
            self.active.add(key)
            try:
                paths = {self.binding(value, index) for value in values}
            finally:
                self.active.discard(key)
            found = next(iter(paths)) if len(paths) == 1 else None
            self.memo[key] = found
            return found
        return None

    def own_instance(self, name: str, start: int = 0) -> bool:
        """Whether `name`, looked up from scope `start` outward, is bound as the first
        parameter of a method (``self``, a classmethod's ``cls``)."""
        for scope in self.scopes[start:]:
            if name in scope.deferred:
                continue
            values = scope.bindings.get(name)
            if values is None:
                continue
            return any(value is not _UNTYPED and value[0] in (_SELF, _CLS) for value in values)
        return False

    def builtin(self, name: str) -> tuple[str, ...] | None:
        """``("builtins", name)`` for a builtin class (or ``sorted``/``open``) the
        document never rebinds and no star import may shadow; else None."""
        if name not in _BUILTIN_RESULTS and name != "open":
            return None
        facts = self.facts
        if facts is None or facts.star_import or name in self.roots or name in facts.bound:
            return None
        return ("builtins", name)

    def binding(self, value, scope_index: int) -> tuple[str, ...] | None:
        if value is _UNTYPED:
            return None
        how, node = value
        if how in (_IMPORTED, _CLASS):  # an import or a class binds a module, a class, not a typed value
            return None
        if how == "annotation":
            return self.annotation(node, scope_index)
        if how in (_SELF, _CLS):
            base = self.class_base(node, 0)
            if base is None:
                return None
            return (*base, CALL) if how == _SELF else base
        if how == _WITH:
            path = self.expression(node, scope_index, 0)
            return (*path, ENTER, CALL) if path is not None and path[-1] == CALL else None
        path = self.expression(node, scope_index, 0)
        return path if path is not None and path[-1] == CALL else None

    def class_base(self, node, depth: int) -> tuple[str, ...] | None:
        """The one library class (a path the index answers, without `CALL`) among the
        bases of the document's class `node` and of its document bases; None when there
        are none or several, a base is not known, or the class may take attributes no
        source names (a metaclass, a class decorator, ``__getattr__``, ``setattr`` with
        a computed name, its ``__dict__`` written)."""
        key = (self.roots_key, node.start_byte, node.end_byte)
        if key in self.class_memo:
            return self.class_memo[key]
        self.class_memo[key] = None  # a class that is its own base: unknown
        found = self._class_base(node, depth)
        self.class_memo[key] = found
        return found

    def _class_base(self, node, depth: int) -> tuple[str, ...] | None:
        if depth > _MAX_DEPTH or node is None or node.type != "class_definition":
            return None
        parent = node.parent
        if parent is not None and parent.type == "decorated_definition":
            for decorator in parent.children:
                if decorator.type == "decorator" and _text(decorator).lstrip("@").strip().split("(")[0] not in _PLAIN_CLASS_DECORATORS:
                    return None
        body = node.child_by_field_name("body")
        if body is not None and _DYNAMIC_CLASS.search(_text(body)):
            return None
        bases = node.child_by_field_name("superclasses")
        if bases is None:
            return None
        found: list[tuple[str, ...]] = []
        for base in bases.named_children:
            if base.type == "comment":
                continue
            if base.type in ("keyword_argument", "list_splat", "dictionary_splat"):
                return None  # metaclass=..., *bases
            if base.type == "identifier" and _text(base) == "object" and "object" not in self.roots:
                continue
            if base.type == "identifier" and _text(base) not in self.roots:
                local = self._module_class(_text(base))
                if local is None:
                    builtin = self.builtin(_text(base))
                    if builtin is None or builtin[1] not in _BUILTIN_CLASSES:
                        return None
                    found.append(builtin)
                    continue
                inherited = self.class_base(local, depth + 1)
                if inherited is not None:
                    found.append(inherited)
                    continue
                local_bases = local.child_by_field_name("superclasses")
                if local_bases is not None and any(b.type != "comment" and _text(b) != "object" for b in local_bases.named_children):
                    return None  # a document base whose own bases are not known
                body = local.child_by_field_name("body")
                if body is not None and _DYNAMIC_CLASS.search(_text(body)):
                    return None
                continue  # a mixin of the document without bases: its names are the document's
            if base.type not in ("identifier", "attribute"):
                return None  # Generic[T], a call, ...
            path = self.expression(base, len(self.scopes) - 1, 0, annotation=True)
            if path is None or CALL in path:
                return None
            found.append(path)
        distinct = list(dict.fromkeys(found))
        return distinct[0] if len(distinct) == 1 else None

    def _module_class(self, name: str):
        """The class the module scope binds `name` to (its only binding), or None."""
        module = self.scopes[-1]
        values = module.bindings.get(name) or []
        if len(values) != 1 or values[0] is _UNTYPED or values[0][0] != _CLASS:
            return None
        return values[0][1]

    def annotation(self, node, scope_index: int) -> tuple[str, ...] | None:
        if node.type == "type" and node.named_child_count == 1:
            node = node.named_children[0]
        if node.type == "subscript":  # NDArray[np.float64]: the generic's origin
            node = node.child_by_field_name("value")
            if node is None:
                return None
        if node.type not in ("identifier", "attribute"):
            return None  # strings, unions (X | None), calls
        path = self.expression(node, scope_index, 0, annotation=True)
        if path is not None and path[0] == "builtins" and len(path) == 2 and path[1] not in _BUILTIN_CLASSES:
            return None
        if path is not None and path[0] in ("typing", "typing_extensions"):
            return None  # Any, Optional[...], Union[...], TypeVar: not the class of the value
        if path is not None and path[-1] == "object":
            return None  # anything
        return (*path, CALL) if path is not None and CALL not in path else None

    def expression(self, node, scope_index: int, depth: int, annotation: bool = False) -> tuple[str, ...] | None:
        if depth > _MAX_DEPTH or node is None:
            return None
        kind = node.type
        if kind == "identifier":
            name = _text(node)
            # an import alias is a root (its own scope rules are the imports' business)
            root = self.roots.get(name)
            if root is not None:
                return tuple(root)
            if annotation:
                return self.builtin(name)
            found = self.name(name, scope_index)
            return found if found is not None else self.builtin(name)
        if kind == "attribute":
            owner = node.child_by_field_name("object")
            if not annotation and owner is not None and owner.type == "identifier" and self.own_instance(_text(owner), scope_index):
                return None  # ``self.x``: what a subclass of the document's class sets, maybe
            base = self.expression(owner, scope_index, depth + 1, annotation)
            attribute = node.child_by_field_name("attribute")
            if base is None or attribute is None:
                return None
            return (*base, _text(attribute))
        if kind == "call" and not annotation:
            function = node.child_by_field_name("function")
            if function is not None and function.type == "attribute":
                called = function.child_by_field_name("attribute")
                if called is not None and _text(called)[:2] == "__":
                    return None  # Cls.__new__(Cls), obj.__call__(): the protocol says nothing of the type
                if called is not None and self.facts is not None and self.facts.may_define(_text(called)):
                    return None  # a method the document's classes define may override a library one
            base = self.expression(function, scope_index, depth + 1)
            if base is not None and base[0] == "builtins" and len(base) == 2:
                if base[1] == "open":
                    return open_path(node)
                if base[1] not in _BUILTIN_RESULTS:
                    return None
            return (*base, CALL) if base is not None else None
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.expression(node.named_children[0], scope_index, depth + 1, annotation)
        if not annotation:
            return literal_path(node)
        return None


def receiver_bindings(
    document: str, offset: int, roots: Mapping[str, tuple[str, ...]], analysis: DocumentAnalysis | None = None
) -> dict[str, tuple[str, ...]]:
    """`receivers_at` for a text (`analysis`: its analysis, when the caller has it; else
    the one kept for the text)."""
    if not document:
        return {}
    return receivers_at(analysis_of(document, analysis), offset, roots)


def receivers_at(analysis: DocumentAnalysis, offset: int, roots: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """Name -> typed path (ending in `CALL`) for the names visible at character `offset`
    whose type the document states (see the module docstring); never raises (a document
    that cannot be read binds none).  Kept with the text's facts."""
    if not analysis.text:
        return {}
    byte_offset = analysis.byte_offset(offset)
    facts = document_facts(analysis.tree, analysis.data)
    found = facts.answer(("receivers", byte_offset, tuple(sorted(roots.items()))), lambda: _receivers(facts, byte_offset, roots))
    return dict(found)


def _receivers(facts: _DocumentFacts, byte_offset: int, roots: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    try:
        source, tree = facts.source, facts.tree
        scopes = _scopes(tree, source, byte_offset, facts.module)
        resolver = _Resolver(scopes, roots, facts)
        # a name no scope binds to something typable has no type: not looked up (a
        # long module binds thousands of names, functions and classes mostly)
        names = set().union(*(scope.typable for scope in scopes))
        found = {}
        for name in sorted(names):
            if name in roots or not name.isidentifier():
                continue
            path = resolver.name(name)
            if path is not None:
                found[name] = path
        return found
    except Exception:  # noqa: BLE001 - an unreadable document binds nothing
        log.debug("could not read the document's typed names", exc_info=True)
        return {}


_ASSIGNED_QUERY = None


class AssignedNames(frozenset):
    """`assigned_attribute_names` for completions: the names, and `open_paths`, the typed
    paths of ``self`` / ``cls`` in the document's classes.  A completion after ``self.``
    may be a new attribute about to be assigned (``self.total = 0``), which no prefix
    check can tell from a read: on those paths an unlisted name may be written, but not
    called (the API monitor treats them as data, as a DataFrame's columns)."""

    open_paths: frozenset = frozenset()
    #: the cursor's class runs to the end of the document: a name neither it nor its base
    #: has may be a method still to be written, so only a misspelling of one it has is
    #: rejected when called (``self.assertEqaul(``, not ``self.read_helper(``)
    class_open: bool = False

    def __new__(cls, names=(), open_paths=(), class_open: bool = False):
        made = super().__new__(cls, names)
        made.open_paths = frozenset(tuple(p) for p in open_paths)
        made.class_open = class_open
        return made


def self_paths(analysis: DocumentAnalysis, roots: Mapping[str, tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    """The typed paths ``self`` and ``cls`` have in the document's classes (their one
    library base, `_Resolver.class_base`); kept with the text's facts."""
    facts = document_facts(analysis.tree, analysis.data)
    return facts.answer(("self paths", tuple(sorted(roots.items()))), lambda: _self_paths(facts, roots))


def _self_paths(facts: _DocumentFacts, roots: Mapping[str, tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    try:
        tree = facts.tree
        resolver = _Resolver([facts.module], roots, facts)
        found = set()
        # every class of the document, at any depth (a class made inside a function too)
        for node in _class_nodes(tree):
            base = resolver.class_base(node, 0)
            if base is not None:
                found.update({base, (*base, CALL)})
        return frozenset(found)
    except Exception:  # noqa: BLE001 - an unreadable document types no self
        log.debug("could not type the document's self", exc_info=True)
        return frozenset()


_CLASS_QUERY = None


def _class_nodes(tree) -> list:
    """Every class definition of the tree."""
    global _CLASS_QUERY
    from tree_sitter import Query, QueryCursor

    if _CLASS_QUERY is None:
        _CLASS_QUERY = Query(_parser().language, "(class_definition) @class")
    return QueryCursor(_CLASS_QUERY).captures(tree.root_node).get("class", [])


def attribute_names(tree) -> frozenset[str]:
    """The attribute names a parsed document assigns on objects and its classes define
    (`assigned_attribute_names`, uncached: other files read with it)."""
    global _ASSIGNED_QUERY
    from tree_sitter import Query, QueryCursor

    if _ASSIGNED_QUERY is None:
        _ASSIGNED_QUERY = Query(
            _parser().language,
            """
            (assignment left: (attribute attribute: (identifier) @name))
            (augmented_assignment left: (attribute attribute: (identifier) @name))
            (pattern_list (attribute attribute: (identifier) @name))
            (tuple_pattern (attribute attribute: (identifier) @name))
            (call function: (identifier) @function arguments: (argument_list . (_) . (string) @key))
            (class_definition body: (block (function_definition name: (identifier) @name)))
            (class_definition body: (block (decorated_definition definition: (_ name: (identifier) @name))))
            (class_definition body: (block (class_definition name: (identifier) @name)))
            (class_definition body: (block (expression_statement (assignment left: (identifier) @name))))
            (class_definition body: (block (expression_statement (assignment left: (pattern_list (identifier) @name)))))
            (class_definition body: (block (_ (block (expression_statement (assignment left: (identifier) @name))))))
            (class_definition body: (block (_ (block (function_definition name: (identifier) @name)))))
            (class_definition body: (block (_ (block (decorated_definition definition: (_ name: (identifier) @name))))))
            (class_definition body: (block (_ (_ (block (expression_statement (assignment left: (identifier) @name)))))))
            (class_definition body: (block (_ (_ (block (function_definition name: (identifier) @name))))))
            """,
        )
    captures = QueryCursor(_ASSIGNED_QUERY).captures(tree.root_node)
    names = {_text(node) for node in captures.get("name", [])}
    # (the patterns on class bodies) what the document's classes define: `self` of a
    # method is typed by the class's library base, and an instance of a subclass may
    # stand where the base is named
    if any(_text(node) == "setattr" for node in captures.get("function", [])):
        names.update(_text(node).strip("'\"rbuRBU") for node in captures.get("key", []))
    return frozenset(name for name in names if name.isidentifier())


def assigned_attribute_names(
    document: str, analysis: DocumentAnalysis | None = None, roots: Mapping[str, tuple[str, ...]] | None = None
) -> frozenset[str]:
    """`assigned_names` for a text (`analysis`: its analysis, when the caller has it;
    else the one kept for the text)."""
    if not document:
        return frozenset()
    return assigned_names(analysis_of(document, analysis), roots)


def assigned_names(analysis: DocumentAnalysis, roots: Mapping[str, tuple[str, ...]] | None = None) -> frozenset[str]:
    """The attribute names the document assigns on any object (``server.wfile = f``,
    ``self.count += 1``, ``a.x, b.y = ...``, ``setattr(obj, "name", v)``) and the names
    its classes define (methods, class attributes): an object of a library class may
    get them at run time (or be an instance of such a subclass), so they are never
    rejected on a typed receiver.  With `roots` (completions): an `AssignedNames` that
    also holds the paths of ``self`` and ``cls``.  Kept with the text's facts."""
    facts = document_facts(analysis.tree, analysis.data)
    found = facts.answer("assigned names", lambda: _assigned(facts.tree))
    return AssignedNames(found, self_paths(analysis, roots)) if roots is not None else found


def _assigned(tree) -> frozenset[str]:
    try:
        return attribute_names(tree)
    except Exception:  # noqa: BLE001 - an unreadable document assigns nothing we know of
        log.debug("could not read the document's attribute assignments", exc_info=True)
        return frozenset()


class DocumentScopes:
    """The typed names of a whole parsed document, for any node in it (the checker of
    existing code asks at every use site; `receiver_bindings` answers for one cursor in
    text that may still be half written).

    Scopes follow the tree, not the indentation: the functions, lambdas and
    comprehensions a node lies in, the class body it is directly in, then the module.
    Each scope's bindings are read once; `typed(node, name)` is the typed path of
    `name` as seen at `node` (None: unknown), by the same rules as `receiver_bindings`.
    """

    def __init__(self, tree, roots: Mapping[str, tuple[str, ...]], source: bytes | None = None):
        self.roots = dict(roots)
        self.facts = document_facts(tree, source if source is not None else tree.root_node.text)
        self.module = self.facts.module
        self._scopes: dict[tuple[int, int, str], _Scope] = {}
        self._resolvers: dict[tuple, _Resolver] = {}

    def _scope(self, node, kind: str) -> _Scope:
        key = (node.start_byte, node.end_byte, node.type)
        scope = self._scopes.get(key)
        if scope is not None:
            return scope
        scope = _Scope(node, "function" if kind != "class" else "class")
        if kind == "function":
            _parameters(node, scope)
            body = node.child_by_field_name("body")
            if body is not None:
                _collect(body, scope)
        elif kind == "lambda":
            parameters = node.child_by_field_name("parameters")
            if parameters is not None:
                _targets(parameters, scope)
                for parameter in parameters.children:
                    name = parameter.child_by_field_name("name")
                    if name is not None:
                        scope.bind(_text(name), _UNTYPED)
        elif kind == "comprehension":
            for clause in node.children:
                if clause.type == "for_in_clause":
                    left = clause.child_by_field_name("left")
                    if left is not None:
                        _targets(left, scope)
        else:  # a class body
            body = node.child_by_field_name("body")
            if body is not None:
                _collect(body, scope)
        self._scopes[key] = scope
        return scope

    def chain(self, node) -> list[_Scope]:
        """The scopes visible at `node`, innermost first."""
        scopes: list[_Scope] = []
        first_definition = True
        child, parent = node, node.parent
        while parent is not None:
            kind = parent.type
            if kind in _COMPREHENSIONS:
                scopes.append(self._scope(parent, "comprehension"))
            elif kind == "lambda" and child.type != "lambda_parameters":
                scopes.append(self._scope(parent, "lambda"))
            elif kind == "function_definition" and child == parent.child_by_field_name("body"):
                scopes.append(self._scope(parent, "function"))
                first_definition = False
            elif kind == "class_definition" and child == parent.child_by_field_name("body"):
                if first_definition:  # a class body is visible only directly in it
                    scopes.append(self._scope(parent, "class"))
                first_definition = False
            child, parent = parent, parent.parent
        scopes.append(self.module)
        return scopes

    def resolver(self, node) -> _Resolver:
        """The resolver of typed expressions as seen at `node` (shared by every node
        with the same scopes)."""
        scopes = self.chain(node)
        key = tuple(id(scope) for scope in scopes)
        resolver = self._resolvers.get(key)
        if resolver is None:
            resolver = self._resolvers[key] = _Resolver(scopes, self.roots, self.facts)
        return resolver

    def typed(self, node, name: str) -> tuple[str, ...] | None:
        """The typed path (ending in `CALL`) of `name` as seen at `node`; None when
        unknown, and for import aliases (those are roots)."""
        if name in self.roots:
            return None
        try:
            return self.resolver(node).name(name)
        except Exception:  # noqa: BLE001 - an unreadable binding is unknown
            log.debug("could not type %s", name, exc_info=True)
            return None

    def own_instance(self, node, name: str) -> bool:
        """Whether `name` as seen at `node` is the first parameter of a method of the
        document's class (``self``, ``cls``): a value of that class or of any subclass,
        in this document or another, which may add any attribute."""
        try:
            return self.resolver(node).own_instance(name)
        except Exception:  # noqa: BLE001 - an unreadable binding: say so
            return True

    def builtin(self, name: str) -> tuple[str, ...] | None:
        """``("builtins", name)`` for a builtin class, ``sorted`` or ``open`` that the
        document never rebinds (and no star import may shadow); else None."""
        return _Resolver([self.module], self.roots, self.facts).builtin(name)

    def builtin_function(self, name: str) -> tuple[str, ...] | None:
        """``("builtins", name)`` for any builtin function the document never rebinds
        (its keyword names are checked; what it returns is not typed); else None."""
        if name.startswith("_") or name in ("type", "super") or not callable(getattr(builtins, name, None)):
            return None
        facts = self.facts
        if facts.star_import or name in self.roots or name in facts.bound:
            return None
        return ("builtins", name)

    def defines(self, name: str) -> bool:
        """Whether the document may define `name` (a method of one of its classes may
        override a library method of that name: what it returns is not the library's)."""
        return self.facts.may_define(name)

    @staticmethod
    def literal(node) -> tuple[str, ...] | None:
        """The typed path of a literal or display (`literal_path`)."""
        return literal_path(node)

    @staticmethod
    def opened(call) -> tuple[str, ...] | None:
        """What a call of the builtin ``open`` returns (`open_path`)."""
        return open_path(call)

    def bound_otherwise(self, name: str) -> bool:
        """Whether `name` is bound anywhere in the document by something other than an
        import (an assignment other than ``= None``, a parameter, a loop target, a
        definition...): an alias of that name may then not be the module."""
        if name not in self.facts.bound_not_imported:  # the common case, without building every scope
            return False
        for scope in (self.module, *self._all_scopes()):
            for value in scope.bindings.get(name, ()):
                if value is _UNTYPED:
                    return True
                how, node = value
                if how == _IMPORTED or (how == "value" and node is not None and node.type == "none"):
                    continue
                return True
        return False

    def _all_scopes(self) -> list[_Scope]:
        """Every function, lambda and comprehension scope of the document (built on
        first call)."""
        if getattr(self, "_every", None) is None:
            found = []
            stack = [self.module.node]
            while stack:
                node = stack.pop()
                kind = node.type
                if kind == "function_definition":
                    found.append(self._scope(node, "function"))
                elif kind == "lambda":
                    found.append(self._scope(node, "lambda"))
                elif kind in _COMPREHENSIONS:
                    found.append(self._scope(node, "comprehension"))
                elif kind == "class_definition":
                    found.append(self._scope(node, "class"))
                stack.extend(node.children)
            self._every = found
        return self._every
