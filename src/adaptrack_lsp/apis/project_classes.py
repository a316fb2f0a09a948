"""What an instance of one of the project's own classes has, read from its source.

In a trusted workspace, `JediIndex` answers the members of a path such as
``("inventory", "Stock", "()")`` (a parameter annotated ``stock: Stock``, a call
``Stock()``) from the project's files, never by running them (`ProjectClasses`):

- the module is found in the workspace (``inventory.py`` or ``inventory/__init__.py``,
  in the workspace, its ``src/`` or the one folder under it that holds it), the class by
  name in it or through the module's ``from ... import`` of it (a re-export);
- its members: the methods and class attributes of its body (annotated fields
  included), the names its methods assign as ``self.NAME`` (`introspect_worker`'s
  reading of a class's source), the names of a literal ``__slots__``, and what its
  bases have: a base of the project is read the same way, a library base is asked of
  the index (an instance of it, `members_of`);
- a class whose instances may have anything: ``__getattr__`` / ``__getattribute__``, a
  ``__slots__`` that is not a literal, ``setattr`` with a computed name or its
  ``__dict__`` written, a metaclass, a class decorator other than ``dataclass`` and the
  like, an abstract class or a protocol (what is passed is a subclass) — answered with
  the ``"*"`` member; a base that cannot be read or named makes the class unknown.

Answers are kept per file modification time: an edited file is read again.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from adaptrack_lsp.apis.index import CALL, Member

#: the member standing for "instances have other attributes too"
ANY_ATTRIBUTE = "*"
#: class decorators that add no attribute a check could miss
PLAIN_DECORATORS = frozenset({"dataclass", "dataclasses.dataclass", "total_ordering", "functools.total_ordering", "final", "typing.final", "unique", "enum.unique"})
#: bases that say the object passed is some other class (abstract classes, protocols)
OPEN_BASES = frozenset({"ABC", "abc.ABC", "Protocol", "typing.Protocol", "typing_extensions.Protocol"})
#: folders never searched for the project's modules
_SKIPPED = frozenset({"node_modules", "site-packages", "build", "dist", "__pycache__"})
_MAX_DEPTH = 6

MembersOf = Callable[[tuple[str, ...]], "Mapping[str, Member] | None"]


class ProjectClasses:
    """Reads the project's classes under `workspace`; `members_of(path)` answers for a
    library class's instance (``("collections", "UserDict", "()")``)."""

    def __init__(self, workspace: str | os.PathLike, members_of: MembersOf):
        self.workspace = Path(workspace)
        self.members_of = members_of
        self._modules: dict[tuple[str, ...], Path | None] = {}
        self._trees: dict[Path, tuple[float, ast.Module | None]] = {}

    # -- files ---------------------------------------------------------------------------
    def module_file(self, module: tuple[str, ...]) -> Path | None:
        """The file of project module `module`, or None when the project has none (or
        more than one place could hold it)."""
        if module in self._modules:
            found = self._modules[module]
            if found is None or found.exists():
                return found
        found = self._find(module)
        self._modules[module] = found
        return found

    def _find(self, module: tuple[str, ...]) -> Path | None:
        places = []
        for folder in self._folders_holding(module[0]):
            relative = Path(*module)
            for candidate in (folder / relative.with_suffix(".py"), folder / relative / "__init__.py"):
                if candidate.is_file():
                    places.append(candidate)
                    break
        return places[0] if len(places) == 1 else None

    def _folders_holding(self, root: str) -> list[Path]:
        """The folders of the workspace whose child is module or package `root`."""
        found = []
        stack = [(self.workspace, 0)]
        while stack:
            folder, depth = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            if any(e.name in (root + ".py", root) for e in entries):
                found.append(folder)
                continue
            for entry in entries:
                name = entry.name
                if depth + 1 < _MAX_DEPTH and name.isidentifier() and not name.startswith(".") and name not in _SKIPPED:
                    try:
                        if entry.is_dir(follow_symlinks=False) and not (Path(entry.path) / "pyvenv.cfg").exists():
                            stack.append((Path(entry.path), depth + 1))
                    except OSError:
                        continue
        return found

    def tree(self, file: Path) -> ast.Module | None:
        try:
            stamp = file.stat().st_mtime
        except OSError:
            return None
        cached = self._trees.get(file)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            tree = ast.parse(file.read_bytes())
        except (OSError, SyntaxError, ValueError):
            tree = None
        self._trees[file] = (stamp, tree)
        return tree

    def stamp(self, path: tuple[str, ...]) -> tuple | None:
        """What an answer for `path` depends on (file and modification time), or None."""
        located = self.locate(path)
        if located is None:
            return None
        file = located[0]
        try:
            return (str(file), file.stat().st_mtime)
        except OSError:
            return None

    # -- classes -------------------------------------------------------------------------
    def locate(self, path: tuple[str, ...], depth: int = 0) -> tuple[Path, ast.ClassDef, tuple[str, ...]] | None:
        """(file, class node, module) of the project class `path` names (without the
        final `CALL`), following re-exports; None when it is not one."""
        path = tuple(p for p in path if p != CALL) if path and path[-1] == CALL else tuple(path)
        if depth > 4 or len(path) < 2 or CALL in path:
            return None
        module, name = path[:-1], path[-1]
        file = self.module_file(module)
        if file is None:
            return None
        tree = self.tree(file)
        if tree is None:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return file, node, module
        for node in tree.body:  # a re-export: `from .stock import Stock`
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = _absolute(module, node, file.name == "__init__.py")
                        if source is not None:
                            return self.locate((*source, alias.name), depth + 1)
        return None

    def members(self, path: tuple[str, ...]) -> dict[str, Member] | None:
        """The members of an instance of project class `path` (a path ending in
        `CALL`); None when it is not a project class or something it needs is unknown."""
        return self._members(path, 0)

    def _members(self, path: tuple[str, ...], depth: int) -> dict[str, Member] | None:
        located = self.locate(path)
        if located is None or depth > 8:
            return None
        file, node, module = located
        from adaptrack_lsp.apis.introspect_worker import _self_attributes

        found: dict[str, Member] = {}
        dynamic = _opens(node)
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[item.name] = Member(item.name, "function", False)
                if item.name in ("__getattr__", "__getattribute__"):
                    dynamic = True
                if any(_decorator_name(d).endswith("abstractmethod") for d in item.decorator_list):
                    dynamic = True
            elif isinstance(item, ast.ClassDef):
                found[item.name] = Member(item.name, "class", True)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                for target in targets:
                    for leaf in ast.walk(target):
                        if isinstance(leaf, ast.Name):
                            found.setdefault(leaf.id, Member(leaf.id, "instance", True))
                if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
                    slots = _literal_strings(item.value)
                    if slots is None:
                        dynamic = True
                    else:
                        for slot in slots:
                            found.setdefault(slot, Member(slot, "instance", True))
        names, sets_dynamically = _self_attributes(node, None)
        dynamic = dynamic or sets_dynamically
        for name in names:
            found.setdefault(name, Member(name, "instance", True))
        bases = [base for base in node.bases]
        if not bases:
            inherited = self.members_of(("builtins", "object", CALL))
            if inherited is None:
                return None
            for name, member in inherited.items():
                found.setdefault(name, member)
        for base in bases:
            written = _dotted(base.value if isinstance(base, ast.Subscript) else base)
            if written is None:
                return None
            if written in OPEN_BASES:
                dynamic = True
                continue
            if written in ("object", "Generic", "typing.Generic"):
                continue
            target = _resolve_name(written, module, file, self.tree(file))
            if target is None:
                return None
            inherited = self._members((*target, CALL), depth + 1) if self.locate(target) is not None else self.members_of((*target, CALL))
            if inherited is None:
                return None
            for name, member in inherited.items():
                found.setdefault(name, member)
        if dynamic:
            found[ANY_ATTRIBUTE] = Member(ANY_ATTRIBUTE, "any", False)
        return found


def _opens(node: ast.ClassDef) -> bool:
    """Whether the class's header lets its instances have anything: a metaclass (an ABC
    one included) or a class decorator that is not known to add nothing."""
    if any(keyword.arg == "metaclass" for keyword in node.keywords):
        return True
    return any(_decorator_name(d) not in PLAIN_DECORATORS for d in node.decorator_list)


def _decorator_name(node) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return _dotted(target) or ""


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _literal_strings(node) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return [e.value for e in node.elts]
    return None


def _absolute(module: tuple[str, ...], node: ast.ImportFrom, is_package: bool) -> tuple[str, ...] | None:
    """The module a ``from ... import`` in `module` names, made absolute."""
    if not node.level:
        return tuple(node.module.split(".")) if node.module else None
    package = module if is_package else module[:-1]
    if node.level - 1 > len(package):
        return None
    base = package[: len(package) - (node.level - 1)]
    return (*base, *node.module.split(".")) if node.module else base


def _resolve_name(written: str, module: tuple[str, ...], file: Path, tree: ast.Module | None) -> tuple[str, ...] | None:
    """The dotted path a base class written as `written` names in `module`: a class of
    the module, a name it imports, an attribute of a module it imports, or a builtin
    class the module does not rebind."""
    import builtins

    head, _, rest = written.partition(".")
    body = tree.body if tree is not None else []
    for item in body:
        if isinstance(item, ast.ClassDef) and item.name == head and not rest:
            return (*module, head)
        if isinstance(item, ast.ImportFrom):
            for alias in item.names:
                if (alias.asname or alias.name) == head:
                    source = _absolute(module, item, file.name == "__init__.py")
                    if source is None:
                        return None
                    return (*source, alias.name, *(rest.split(".") if rest else ()))
        if isinstance(item, ast.Import):
            for alias in item.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound == head:
                    target = alias.name.split(".") if alias.asname else [head]
                    return (*target, *(rest.split(".") if rest else ()))
    rebound = any(
        isinstance(leaf, ast.Name) and leaf.id == head and isinstance(leaf.ctx, ast.Store) for item in body for leaf in ast.walk(item)
    )
    if not rest and not rebound and isinstance(getattr(builtins, head, None), type):
        return ("builtins", head)
    return None


__all__ = ["ProjectClasses"]
