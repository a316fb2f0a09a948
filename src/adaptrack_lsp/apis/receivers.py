"""Typed receivers: the names a document binds to values whose type an API index can
name, as seen from the cursor.

`receiver_bindings(document, offset, roots)` reads the document with tree-sitter-python
and returns name -> expression path ending in `CALL` ("the value this call returns";
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

import logging
import re
from collections.abc import Mapping

from adaptrack_lsp.apis.imports import _parser
from adaptrack_lsp.apis.index import CALL

log = logging.getLogger(__name__)

__all__ = ["assigned_attribute_names", "receiver_bindings"]

#: a binding that names no typed value (makes its name unknown in its scope)
_UNTYPED = None
#: how an import binds a name (untyped too, but `DocumentScopes.bound_otherwise` tells it apart)
_IMPORTED = "import"
_MAX_DEPTH = 8
_CACHE: dict[tuple, dict[str, tuple[str, ...]]] = {}
_CACHE_SIZE = 8


def _text(node) -> str:
    return node.text.decode("utf-8", "replace")


class _Scope:
    """The bindings one scope makes: name -> list of value nodes (None: untyped)."""

    def __init__(self, node, kind: str):
        self.node = node
        self.kind = kind  # "module" or "function"
        self.bindings: dict[str, list] = {}
        self.deferred: set[str] = set()  # global / nonlocal names

    def bind(self, name: str, value) -> None:
        self.bindings.setdefault(name, []).append(value)


def _targets(node, scope: _Scope) -> None:
    """Bind every identifier inside a target (tuple/list targets, starred) as untyped."""
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
                scope.bind(_text(name), _UNTYPED)
            if kind == "class_definition":
                continue
            continue
        if kind == "decorated_definition":
            definition = child.child_by_field_name("definition")
            name = definition.child_by_field_name("name") if definition is not None else None
            if name is not None:
                scope.bind(_text(name), _UNTYPED)
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
            if alias is not None:
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


def _parameters(function, scope: _Scope) -> None:
    parameters = function.child_by_field_name("parameters")
    if parameters is None:
        return
    for parameter in parameters.children:
        kind = parameter.type
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


def _definitions(node, byte_offset: int, found: list) -> None:
    for child in node.children:
        if child.start_byte >= byte_offset:
            break
        if child.type in ("function_definition", "class_definition"):
            found.append(child)
        if child.type in ("function_definition", "class_definition", "decorated_definition", "block", "if_statement",
                          "for_statement", "while_statement", "try_statement", "with_statement", "else_clause",
                          "elif_clause", "except_clause", "finally_clause", "match_statement", "case_clause", "ERROR"):
            _definitions(child, byte_offset, found)


def _scopes(tree, source: bytes, byte_offset: int) -> list[_Scope]:
    """The scopes visible at `byte_offset`, innermost first: comprehensions and lambdas
    (their variables, untyped), functions, the class body the cursor is directly in,
    then the module."""
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
    module = _Scope(tree.root_node, "module")
    _collect(tree.root_node, module)
    scopes.append(module)
    return scopes


class _Resolver:
    def __init__(self, scopes: list[_Scope], roots: Mapping[str, tuple[str, ...]]):
        self.scopes = scopes
        self.roots = roots
        self.active: set[tuple[str, int]] = set()
        self.memo: dict[tuple[str, int], tuple[str, ...] | None] = {}

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

    def binding(self, value, scope_index: int) -> tuple[str, ...] | None:
        if value is _UNTYPED:
            return None
        how, node = value
        if how == _IMPORTED:  # an import binds a module or a name of one, not a typed value
            return None
        if how == "annotation":
            return self.annotation(node, scope_index)
        path = self.expression(node, scope_index, 0)
        return path if path is not None and path[-1] == CALL else None

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
                return None
            return self.name(name, scope_index)
        if kind == "attribute":
            base = self.expression(node.child_by_field_name("object"), scope_index, depth + 1, annotation)
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
            base = self.expression(function, scope_index, depth + 1)
            return (*base, CALL) if base is not None else None
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.expression(node.named_children[0], scope_index, depth + 1, annotation)
        return None


_TREES: dict[str, tuple[bytes, object]] = {}
_TREES_SIZE = 4


def parsed(source: bytes, key: str = ""):
    """The tree-sitter tree of `source`; with a `key` (a document's URI) the previous
    tree of that document is reused for what did not change (one edit between the first
    and the last differing byte), so typing re-parses a line, not the file."""
    parser = _parser()
    previous = _TREES.get(key) if key else None
    tree = None
    if previous is not None:
        old, old_tree = previous
        if old == source:
            return old_tree
        start = _common_prefix(old, source)
        tail = _common_prefix(old[start:][::-1], source[start:][::-1])
        old_end, new_end = len(old) - tail, len(source) - tail
        old_tree.edit(
            start_byte=start, old_end_byte=old_end, new_end_byte=new_end,
            start_point=_point(old, start), old_end_point=_point(old, old_end), new_end_point=_point(source, new_end),
        )
        tree = parser.parse(source, old_tree)
    if tree is None:
        tree = parser.parse(source)
    if key:
        _TREES.pop(key, None)
        if len(_TREES) >= _TREES_SIZE:
            _TREES.pop(next(iter(_TREES)))
        _TREES[key] = (source, tree)
    return tree


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix of `a` and `b` (halving slices: C-speed compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _point(source: bytes, byte: int) -> tuple[int, int]:
    row = source.count(b"\n", 0, byte)
    return row, byte - (source.rfind(b"\n", 0, byte) + 1)


def receiver_bindings(
    document: str, offset: int, roots: Mapping[str, tuple[str, ...]], key: str = ""
) -> dict[str, tuple[str, ...]]:
    """Name -> typed path (ending in `CALL`) for the names visible at `offset` whose type
    the document states (see the module docstring); never raises (a document that
    cannot be read binds none).  `key`: the document's URI (its parse is reused)."""
    if not document or not roots:
        return {}
    try:
        byte_offset = len(document[:offset].encode("utf-8", "surrogatepass"))
        remembered = (document, byte_offset, tuple(sorted(roots.items())))
        cached = _CACHE.get(remembered)
        if cached is not None:
            return dict(cached)
        source = document.encode("utf-8", "surrogatepass")
        tree = parsed(source, key)
        scopes = _scopes(tree, source, byte_offset)
        resolver = _Resolver(scopes, roots)
        names = set().union(*(scope.bindings for scope in scopes))
        found = {}
        for name in sorted(names):
            if name in roots or not name.isidentifier():
                continue
            path = resolver.name(name)
            if path is not None:
                found[name] = path
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[remembered] = found
        return dict(found)
    except Exception:  # noqa: BLE001 - an unreadable document binds nothing
        log.debug("could not read the document's typed names", exc_info=True)
        return {}


_ASSIGNED_CACHE: dict[str, frozenset[str]] = {}
_ASSIGNED_QUERY = None


def assigned_attribute_names(document: str, key: str = "", tree=None) -> frozenset[str]:
    """The attribute names the document assigns on any object (``server.wfile = f``,
    ``self.count += 1``, ``a.x, b.y = ...``, ``setattr(obj, "name", v)``): an object of a
    library class may get them at run time, so they are never rejected on a typed
    receiver.  `tree`: the document's parse, when the caller has it."""
    global _ASSIGNED_QUERY
    if not document:
        return frozenset()
    cached = _ASSIGNED_CACHE.get(document)
    if cached is not None:
        return cached
    names: set[str] = set()
    try:
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
                """,
            )
        if tree is None:
            tree = parsed(document.encode("utf-8", "surrogatepass"), key)
        captures = QueryCursor(_ASSIGNED_QUERY).captures(tree.root_node)
        names.update(_text(node) for node in captures.get("name", []))
        if any(_text(node) == "setattr" for node in captures.get("function", [])):
            names.update(_text(node).strip("'\"rbuRBU") for node in captures.get("key", []))
    except Exception:  # noqa: BLE001 - an unreadable document assigns nothing we know of
        log.debug("could not read the document's attribute assignments", exc_info=True)
    found = frozenset(name for name in names if name.isidentifier())
    _ASSIGNED_CACHE.clear()
    _ASSIGNED_CACHE[document] = found
    return found


class DocumentScopes:
    """The typed names of a whole parsed document, for any node in it (the checker of
    existing code asks at every use site; `receiver_bindings` answers for one cursor in
    text that may still be half written).

    Scopes follow the tree, not the indentation: the functions, lambdas and
    comprehensions a node lies in, the class body it is directly in, then the module.
    Each scope's bindings are read once; `typed(node, name)` is the typed path of
    `name` as seen at `node` (None: unknown), by the same rules as `receiver_bindings`.
    """

    def __init__(self, tree, roots: Mapping[str, tuple[str, ...]]):
        self.roots = dict(roots)
        self.module = _Scope(tree.root_node, "module")
        _collect(tree.root_node, self.module)
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
            resolver = self._resolvers[key] = _Resolver(scopes, self.roots)
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

    def bound_otherwise(self, name: str) -> bool:
        """Whether `name` is bound anywhere in the document by something other than an
        import (an assignment other than ``= None``, a parameter, a loop target, a
        definition...): an alias of that name may then not be the module."""
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
