"""The checker of existing code: every place a document names an API, asked of the
index the completions are constrained by.

`Checker.check(text)` parses the document with tree-sitter (syntax errors tolerated:
what sits inside an error is named in `CheckResult.unparsed`, never guessed at) and
asks the API index the questions the token-level constraint asks, per use site:

- **imports**: ``import a.b.c`` needs each module importable (`APIIndex.submodules`,
  or a module member of its parent), ``from a.b import c`` needs ``c`` to be a member
  or a submodule of ``a.b``; relative and star imports, and modules of the project
  itself (`local_modules`), are not checked;
- **module attributes**: in ``np.linalg.norm`` each name after a root bound by an
  import is a member of the path before it;
- **typed receivers**: ``a.ptp()`` where ``a = np.zeros(3)`` (`apis.receivers`), and
  chains through calls (``pd.read_csv(f).append``); a data proxy's unlisted
  attributes may be read, not called;
- **keyword names** in calls whose callee resolves (`APIIndex.signature`).

Precision comes first: unknown, union or dynamic types, names the document assigns
on objects, dunder names, an alias the document also binds some other way, and every
use under a guard are never reported.  Guards: a ``try`` whose handlers catch
``ImportError``, ``AttributeError``, ``TypeError`` or anything broader; ``with
suppress(...)`` of those; an ``if``/``elif``/``while``, conditional expression or
``and``/``or`` that tests ``hasattr``, ``getattr``, a version (``sys.version_info``,
``__version__``, ``Version(...)``, ``PY3``), the platform or ``TYPE_CHECKING`` (the whole
statement, every branch); the rest of a block after such an ``if`` that returns or
raises; a definition decorated with a skip or requirement marker that tests one.
Annotations are not checked where ``from __future__ import annotations`` leaves them
unevaluated.

Answers the index has not computed yet are waited for (each at most `wait_s`; one
that does not come is unknown): the walk is repeated until nothing it asked for is
pending, so a check gives the same findings every time.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from adaptrack_lsp.apis.index import CALL, Member, dotted

log = logging.getLogger(__name__)

__all__ = ["CheckCancelled", "CheckResult", "Checker", "Finding", "KINDS"]

#: what a finding is about (the closing note counts misses by these)
KINDS = ("import", "attribute", "receiver", "keyword", "deprecated")
#: the name of the "any attribute" member an index answer may hold (`introspect_worker.ANY_ATTRIBUTE`)
ANY_ATTRIBUTE = "*"
#: exception names whose handler makes the ``try`` body a compatibility shim
_GUARD_EXCEPTIONS = re.compile(r"\b(ImportError|ModuleNotFoundError|AttributeError|TypeError|NameError|Exception|BaseException)\b")
#: a condition that tests what exists or which version runs
_GUARD_TEST = re.compile(
    r"\bhasattr\b|\bgetattr\b|version|VERSION|\bPY\d|\bPY_?\d|TYPE_CHECKING|\bplatform\b|\bos\.name\b|find_spec|\bdir\s*\("
    r"|__dict__|_(?:lt|le|gt|ge|LT|LE|GT|GE)_?\d|\bis_available\b|\bIS_PY|\bcompat\b"
)
#: decorators that skip or require (``@unittest.skipUnless(hasattr(os, "fork"), ...)``)
_SKIP_DECORATOR = re.compile(r"skip|requires|xfail|only_if|\bif_", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
#: calls whose arguments are expected to fail (``self.assertRaises(TypeError, f, x)``)
_EXPECTING_CALL = re.compile(r"(?:^|\.)(?:assertRaises\w*|assertWarns\w*|assert_raises\w*|assert_warns|raises|warns|deprecated_call)$")
_EXITS = frozenset({"return_statement", "raise_statement", "continue_statement", "break_statement"})
#: how long one answer of the index is waited for before it counts as unknown
DEFAULT_WAIT_S = 60.0
#: waits shorter than this are not announced as progress
QUIET_WAIT_S = 0.5


@dataclass(frozen=True)
class Finding:
    """One API use that does not exist in the environment or in some target."""

    #: one of `KINDS`
    kind: str
    #: the use as written: ``np.product``, ``a.ptp``, ``np.histogram(normed=)``, ``numpy.distutils``
    name: str
    message: str
    #: character offsets of the flagged text in the document
    start: int
    end: int
    #: 1-based line and column (in characters) of the start, and of the end
    line: int
    column: int
    end_line: int
    end_column: int
    #: the versions lacking it (``numpy 2.4.6``)
    targets: tuple[str, ...] = ()
    #: the index path whose member is missing (``("numpy",)`` for ``np.product``) or the call key
    path: tuple[str, ...] = ()
    #: the member or keyword name that is missing
    member: str = ""
    #: a deprecation, not an absence (reported as a hint with the Deprecated tag)
    deprecated: bool = False


@dataclass
class CheckResult:
    """The findings of one document, and what could not be checked."""

    findings: list[Finding] = field(default_factory=list)
    #: (1-based line, column, text) of each region that does not parse (not checked)
    unparsed: list[tuple[int, int, str]] = field(default_factory=list)
    #: index paths given up on (not answered in time): uses needing them are unchecked
    unanswered: list[tuple[str, ...]] = field(default_factory=list)
    #: walks of the document (1 + the rounds that waited for the index)
    rounds: int = 0
    #: how many use sites were asked about, per kind
    checked: dict[str, int] = field(default_factory=dict)


def _text(node) -> str:
    return node.text.decode("utf-8", "replace")


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


class CheckCancelled(Exception):
    """A check stopped because its caller no longer wants it (`Checker.check`'s `cancelled`)."""


class Checker:
    """Checks documents against one API index (a live environment, a snapshot, version
    targets: whatever `ConstraintEnvironment.api_index` gives)."""

    def __init__(
        self,
        index,
        *,
        local_modules: Iterable[str] = (),
        wait_s: float = DEFAULT_WAIT_S,
        progress: Callable[[str], None] | None = None,
    ):
        self.index = index
        #: top-level module names of the project itself (never checked as imports)
        self.local_modules = frozenset(local_modules)
        self.wait_s = wait_s
        self.progress = progress
        #: keys the index did not answer in time (unknown from then on)
        self.given_up: set[tuple[str, ...]] = set()

    def check(
        self,
        text: str,
        *,
        local_modules: Iterable[str] = (),
        analysis=None,
        path: str | None = None,
        cancelled: Callable[[], bool] | None = None,
        pause: Callable[[], None] | None = None,
    ) -> CheckResult:
        """The findings of document `text`; `local_modules`: more module names the
        document's own folder offers; `path`: its file (the attribute names the modules
        it imports from its folder and its conftest.py files assign are never rejected,
        `apis.project_attributes`); `analysis`: the document's (`apis.document`; else
        the one kept for the text: an open document's, edited incrementally); `cancelled`: polled as the walk goes and between walks (a newer
        edit): `CheckCancelled` is raised; `pause`: called at the same points, it may
        block (the editor holds a check back while a completion is computed)."""
        from adaptrack_lsp.apis.document import analysis_of
        from adaptrack_lsp.apis.project_attributes import assigned_beside
        from adaptrack_lsp.apis.ready_index import ReadyOnlyIndex

        def checkpoint() -> None:
            if pause is not None:
                pause()
            if cancelled is not None and cancelled():
                raise CheckCancelled

        analysis = analysis_of(text, analysis)
        local = self.local_modules | frozenset(local_modules)
        assigned_elsewhere = assigned_beside(path, analysis)
        # answers given up on in an earlier check may have come since
        self.given_up = {path for path in self.given_up if not self._ready(path)}
        rounds = 0
        while True:
            rounds += 1
            checkpoint()
            view = ReadyOnlyIndex(self.index, unknown=self.given_up, wait_optional=True)
            walk = _Walk(view, analysis, local, checkpoint if (pause or cancelled) else None, assigned_elsewhere)
            result = walk.run()
            result.rounds = rounds
            pending = [p for p in view.pending if p not in self.given_up]
            if not pending:
                result.unanswered = sorted(p for p in self.given_up if p and p[0] in walk.asked_roots)
                return result
            checkpoint()
            self._wait(pending)

    def _ready(self, path: tuple[str, ...]) -> bool:
        try:
            return bool(self.index.ready(path))
        except Exception:  # noqa: BLE001 - not ready
            return False

    def _wait(self, pending: list[tuple[str, ...]]) -> None:
        from adaptrack_lsp.apis.index import describe_key

        waiting = [p for p in pending if not self.index.ready(p)]
        if not waiting:
            return
        # answers from the disk cache come in milliseconds: say nothing for those
        if self.index.wait_ready(waiting, QUIET_WAIT_S):
            return
        waiting = [p for p in waiting if not self.index.ready(p)]
        if not waiting:
            return
        if self.progress is not None:
            shown = ", ".join(describe_key(p) for p in waiting[:4]) + (f" and {len(waiting) - 4} more" if len(waiting) > 4 else "")
            self.progress(f"computing the API members of {shown}")
        deadline = time.monotonic() + self.wait_s
        for path in waiting:
            if not self.index.wait_ready([path], max(0.5, deadline - time.monotonic())):
                self.given_up.add(path)


class _Walk:
    """One walk of one parsed document against one index view."""

    #: nodes visited between two calls of the checkpoint
    CHECKPOINT_EVERY = 64

    def __init__(self, index, analysis, local_modules: frozenset[str], checkpoint: Callable[[], None] | None = None,
                 assigned_elsewhere: frozenset[str] = frozenset()):
        from adaptrack_lsp.apis.receivers import DocumentScopes, assigned_names

        self.index = index
        tree = self.tree = analysis.tree
        self.source = analysis.data
        self.local_modules = local_modules
        document = self.document = analysis.text
        roots = analysis.roots
        self.scopes = DocumentScopes(tree, roots)
        # an alias the document also binds some other way, or imports from two places
        # (a fallback for what may not be installed), may not be the module
        ambiguous = analysis.ambiguous | self.guarded_only(tree)
        self.roots = {alias: path for alias, path in roots.items() if alias not in ambiguous and not self.scopes.bound_otherwise(alias)}
        self.assigned = assigned_names(analysis) | assigned_elsewhere
        edges: dict[tuple[str, ...], set[str]] = {}
        for module in analysis.modules:
            for depth in range(1, len(module)):
                edges.setdefault(module[:depth], set()).add(module[depth])
        self.module_edges = edges
        self.lazy_annotations = bool(re.search(r"^from\s+__future__\s+import\s+[^\n]*\bannotations\b", document, re.MULTILINE))
        self.result = CheckResult()
        self.checkpoint = checkpoint
        self._visits = 0
        self._members: dict[tuple[str, ...], Mapping[str, Member] | None] = {}
        self._line_starts: list[int] | None = None
        self.asked_roots: set[str] = set()
        try:
            self._versions = dict(index.packages())
        except Exception:  # noqa: BLE001 - versions only decorate messages
            self._versions = {}

    # -- the index, cached for this walk -------------------------------------------------
    def members(self, path: tuple[str, ...], imported: bool = True) -> Mapping[str, Member] | None:
        """The index's members of `path`; with `imported`, plus the submodules the
        document's own imports load (``import a.b`` makes ``a.b`` exist at run time)."""
        key = (path, imported)
        if key in self._members:
            return self._members[key]
        self.asked_roots.add(path[0])
        try:
            found = self.index.members(path)
        except Exception as error:  # noqa: BLE001 - an index failure is unknown
            log.debug("members of %s failed: %s", dotted(path), error)
            found = None
        if found is not None and imported:
            extra = self.module_edges.get(path)
            if extra:
                found = {**found, **{name: Member(name, "module") for name in extra if name not in found}}
        self._members[key] = found
        return found

    def submodules(self, path: tuple[str, ...]) -> frozenset[str] | None:
        if path:
            self.asked_roots.add(path[0])
        try:
            return self.index.submodules(path)
        except Exception as error:  # noqa: BLE001
            log.debug("modules under %s failed: %s", dotted(path), error)
            return None

    def signature(self, key: tuple[str, ...]):
        self.asked_roots.add(key[0])
        try:
            return self.index.signature(key)
        except Exception as error:  # noqa: BLE001
            log.debug("signature of %s failed: %s", dotted(key), error)
            return None

    def version(self, root: str) -> str:
        version = self._versions.get(root, "")
        return f"{root} {version}" if version and version != "unknown" else ""

    def lacking(self, path: tuple[str, ...], name: str, keyword: bool = False) -> tuple[str, tuple[str, ...]]:
        """(the note on the versions lacking `name`, those versions) — from version
        targets when only some lack it, else the installed version."""
        try:
            found = self.index.lacking(path, name, keyword)
        except Exception:  # noqa: BLE001
            found = None
        if found:
            package, lacking, present = found
            return f"not in {package} {', '.join(lacking)} (present in {', '.join(present)})", tuple(f"{package} {v}" for v in lacking)
        version = self.version(path[0])
        return "", (version,) if version else ()

    # -- the walk ------------------------------------------------------------------------
    def run(self) -> CheckResult:
        self.visit(self.tree.root_node, False)
        self.result.findings.sort(key=lambda f: (f.start, f.end, f.name))
        return self.result

    def visit(self, node, guarded: bool) -> None:
        if self.checkpoint is not None:
            self._visits += 1
            if self._visits % self.CHECKPOINT_EVERY == 0:
                self.checkpoint()
        kind = node.type
        if kind == "ERROR" or node.is_missing:
            self.unparsed(node)
            return
        if kind in ("comment", "string_content"):
            return
        if kind == "try_statement":
            guarded = guarded or self.try_guards(node)
        elif kind in ("if_statement", "while_statement"):
            guarded = guarded or self.condition_guards(node)
        elif kind == "conditional_expression":
            guarded = guarded or any(_GUARD_TEST.search(_text(child)) for child in node.named_children[1:2])
        elif kind == "boolean_operator":
            left = node.child_by_field_name("left")
            guarded = guarded or (left is not None and bool(_GUARD_TEST.search(_text(left))))
        elif kind == "with_statement":
            guarded = guarded or self.suppress_guards(node)
        elif kind == "call" and not guarded:
            function = node.child_by_field_name("function")
            if function is not None and _EXPECTING_CALL.search(_text(function)):
                # the callee and its own keywords are checked; what it is handed is expected to fail
                self.call(node)
                self.visit(function, guarded)
                for child in node.children:
                    if child != function:
                        self.visit(child, True)
                return
        elif kind == "decorated_definition":
            guarded = guarded or any(
                _SKIP_DECORATOR.search(_text(child)) for child in node.children if child.type == "decorator"
            )
        elif kind == "type" and self.lazy_annotations:
            return  # an annotation that is never evaluated
        if not guarded:
            if kind == "import_statement":
                self.import_statement(node)
                return
            if kind == "import_from_statement":
                self.import_from(node)
                return
            if kind == "attribute":
                self.attribute(node)
            elif kind == "call":
                self.call(node)
        if kind in ("block", "module"):
            self.visit_block(node, guarded)
            return
        for child in node.children:
            self.visit(child, guarded)

    def visit_block(self, block, guarded: bool) -> None:
        """A block's statements; after an ``if`` that tests a guard and leaves the block
        (return, raise, ...), or an assertion of a guard (``assert hasattr(st,
        "st_flags")``, ``self.assertTrue(hasattr(...))``: the block stops there when it
        fails), the rest of the block is guarded too."""
        for child in block.children:
            self.visit(child, guarded)
            if not guarded and child.type == "if_statement" and self.condition_guards(child) and self.leaves(child):
                guarded = True
            elif not guarded and self.asserts_guard(child):
                guarded = True

    @staticmethod
    def asserts_guard(statement) -> bool:
        """Whether `statement` asserts a guard test (`_GUARD_TEST`)."""
        if statement.type == "assert_statement":
            tested = statement.named_children[0] if statement.named_children else None
            return tested is not None and bool(_GUARD_TEST.search(_text(tested)))
        if statement.type != "expression_statement" or statement.named_child_count != 1:
            return False
        call = statement.named_children[0]
        if call.type != "call":
            return False
        function = call.child_by_field_name("function")
        arguments = call.child_by_field_name("arguments")
        return (
            function is not None
            and arguments is not None
            and bool(re.search(r"(?:^|\.)assert(?:True|_)?\w*$", _text(function)))
            and bool(_GUARD_TEST.search(_text(arguments)))
        )

    @staticmethod
    def leaves(if_statement) -> bool:
        body = if_statement.child_by_field_name("consequence")
        if body is None or not body.named_children:
            return False
        return body.named_children[-1].type in _EXITS

    def unparsed(self, node) -> None:
        line, column = self.position(node.start_byte)
        text = _text(node).strip().splitlines()
        shown = (text[0][:60] + ("…" if len(text[0]) > 60 or len(text) > 1 else "")) if text else ""
        end_line, _ = self.position(node.end_byte)
        lines = f"line {line}" if end_line == line else f"lines {line}-{end_line}"
        what = "missing " + node.type if node.is_missing else f"does not parse ({shown!r})" if shown else "does not parse"
        self.result.unparsed.append((line, column, f"{lines} not checked: {what}"))

    # -- guards --------------------------------------------------------------------------
    def guarded_only(self, tree) -> frozenset[str]:
        """The names bound only by imports under a guard (``if sys.platform == "win32":
        import msvcrt``; ``try: import ujson as json``): whether the module is there
        depends on the machine, and so does every use."""
        guarded: set[str] = set()
        plain: set[str] = set()
        stack = [tree.root_node]
        while stack:
            node = stack.pop()
            kind = node.type
            if kind in ("import_statement", "import_from_statement"):
                names = set()
                for child in node.children_by_field_name("name"):
                    alias = child.child_by_field_name("alias") if child.type == "aliased_import" else None
                    target = child.child_by_field_name("name") if child.type == "aliased_import" else child
                    if alias is not None:
                        names.add(_text(alias))
                    elif target is not None and target.type == "dotted_name" and target.named_children:
                        names.add(_text(target.named_children[0]))
                (guarded if self.under_guard(node) else plain).update(names)
                continue
            stack.extend(node.children)
        return frozenset(guarded - plain)

    def under_guard(self, node) -> bool:
        """Whether `node` lies under a guard (see the module docstring)."""
        parent = node.parent
        while parent is not None:
            kind = parent.type
            if kind == "try_statement" and self.try_guards(parent):
                return True
            if kind in ("if_statement", "while_statement") and self.condition_guards(parent):
                return True
            if kind == "with_statement" and self.suppress_guards(parent):
                return True
            if kind == "decorated_definition" and any(
                _SKIP_DECORATOR.search(_text(c)) for c in parent.children if c.type == "decorator"
            ):
                return True
            parent = parent.parent
        return False

    def try_guards(self, node) -> bool:
        for child in node.children:
            if child.type == "except_clause":
                caught = [c for c in child.children if c.is_named and c.type not in ("block", "comment")]
                if not caught:
                    return True  # a bare except
                if _GUARD_EXCEPTIONS.search(_text(caught[0])):
                    return True
            elif child.type == "except_group_clause":
                return True
        return False

    @staticmethod
    def condition_guards(node) -> bool:
        conditions = [node.child_by_field_name("condition")]
        for child in node.children:
            if child.type == "elif_clause":
                conditions.append(child.child_by_field_name("condition"))
        return any(c is not None and _GUARD_TEST.search(_text(c)) for c in conditions)

    @staticmethod
    def suppress_guards(node) -> bool:
        for child in node.children:
            if child.type == "with_clause":
                text = _text(child)
                if "suppress" in text and _GUARD_EXCEPTIONS.search(text):
                    return True
                if _GUARD_TEST.search(text) or re.search(r"\b(warns|raises|catch_warnings|assertRaises\w*|deprecat\w*)\b", text):
                    return True
        return False

    # -- positions -----------------------------------------------------------------------
    def offset(self, byte: int) -> int:
        return len(self.source[:byte].decode("utf-8", "surrogatepass"))

    def position(self, byte: int) -> tuple[int, int]:
        """1-based (line, character column) of byte offset `byte`."""
        if self._line_starts is None:
            starts = [0]
            position = self.source.find(b"\n")
            while position >= 0:
                starts.append(position + 1)
                position = self.source.find(b"\n", position + 1)
            self._line_starts = starts
        import bisect

        row = bisect.bisect_right(self._line_starts, byte) - 1
        start = self._line_starts[row]
        return row + 1, len(self.source[start:byte].decode("utf-8", "surrogatepass")) + 1

    def add(self, kind: str, node_start, node_end, name: str, message: str, targets=(), path=(), member="", deprecated=False) -> None:
        line, column = self.position(node_start.start_byte)
        end_line, end_column = self.position(node_end.end_byte)
        self.result.findings.append(
            Finding(
                kind=kind,
                name=name,
                message=message,
                start=self.offset(node_start.start_byte),
                end=self.offset(node_end.end_byte),
                line=line,
                column=column,
                end_line=end_line,
                end_column=end_column,
                targets=tuple(t for t in targets if t),
                path=tuple(path),
                member=member,
                deprecated=deprecated,
            )
        )

    def count(self, kind: str) -> None:
        self.result.checked[kind] = self.result.checked.get(kind, 0) + 1

    # -- imports -------------------------------------------------------------------------
    @staticmethod
    def dotted_parts(node) -> list:
        return [child for child in node.children if child.type == "identifier"]

    def module_problem(self, parts: list) -> tuple[int, str, tuple[str, ...]] | None:
        """For the identifiers of a module path: (index of the first part that cannot be
        imported, why, the versions lacking it), or None (importable or unknown)."""
        names = tuple(_text(part) for part in parts)
        if not names or names[0] in self.local_modules:
            return None
        for depth in range(len(names)):
            parent, name = names[:depth], names[depth]
            if depth and (parent, name) == (("os",), "path"):
                continue
            modules = self.submodules(parent)
            if modules is None:
                return None
            if name in modules:
                continue
            if depth:
                members = self.members(parent, imported=False)
                if members is None or ANY_ATTRIBUTE in members:
                    return None
                member = members.get(name)
                if member is not None and member.kind == "module":
                    continue
            if not depth:
                return 0, f"no module named {name} can be imported (not installed in this environment)", ()
            note, lacking = self.lacking(parent, name)
            module = ".".join(names[: depth + 1])
            if note:
                return depth, f"{module}: {note}", lacking
            version = self.version(names[0])
            return depth, f"no module {module} can be imported{' in ' + version if version else ''}", lacking
        return None

    def import_statement(self, node) -> None:
        for child in node.children_by_field_name("name"):
            dotted_node = child.child_by_field_name("name") if child.type == "aliased_import" else child
            if dotted_node is None or dotted_node.type != "dotted_name":
                continue
            parts = self.dotted_parts(dotted_node)
            self.count("import")
            problem = self.module_problem(parts)
            if problem is not None:
                depth, message, lacking = problem
                name = ".".join(_text(p) for p in parts[: depth + 1])
                self.add("import", parts[0], parts[depth], name, message, lacking, tuple(_text(p) for p in parts[:depth]), _text(parts[depth]))

    def import_from(self, node) -> None:
        module = node.child_by_field_name("module_name")
        if module is None or module.type != "dotted_name":
            return  # a relative import
        parts = self.dotted_parts(module)
        self.count("import")
        problem = self.module_problem(parts)
        if problem is not None:
            depth, message, lacking = problem
            name = ".".join(_text(p) for p in parts[: depth + 1])
            self.add("import", parts[0], parts[depth], name, message, lacking, tuple(_text(p) for p in parts[:depth]), _text(parts[depth]))
            return
        path = tuple(_text(p) for p in parts)
        if not path or path[0] in self.local_modules or path[0] == "__future__":
            return
        names = []
        for child in node.children_by_field_name("name"):
            target = child.child_by_field_name("name") if child.type == "aliased_import" else child
            if target is not None and target.type == "dotted_name" and len(target.named_children) == 1:
                names.append(target.named_children[0])
        if not names:
            return
        members = self.members(path)
        modules = self.submodules(path)
        if members is None or ANY_ATTRIBUTE in members:
            return
        for name_node in names:
            name = _text(name_node)
            self.count("import")
            if name in members and members[name].deprecated:
                self.deprecation(name_node, f"{dotted(path)}.{name}", path, members[name])
                continue
            if name in members or (modules is not None and name in modules):
                continue
            if modules is None:
                continue  # it may be a submodule
            note, lacking = self.lacking(path, name)
            version = self.version(path[0])
            message = f"{dotted(path)}.{name}: {note}" if note else f"cannot import {name} from {dotted(path)}{' in ' + version if version else ''}"
            self.add("import", name_node, name_node, f"{dotted(path)}.{name}", message, lacking, path, name)

    # -- chains --------------------------------------------------------------------------
    def resolve(self, node, depth: int = 0) -> tuple[str, ...] | None:
        """The index path of the value of expression `node` (a module path, or a path
        through calls ending in `CALL`), or None when unknown."""
        if node is None or depth > 12:
            return None
        kind = node.type
        if kind == "identifier":
            name = _text(node)
            root = self.roots.get(name)
            if root is not None:
                return tuple(root)
            return self.scopes.typed(node, name) or self.scopes.builtin(name)
        if kind == "attribute":
            if self.own_instance(node.child_by_field_name("object")):
                return None  # ``self.x``: what a subclass of the document's class sets, maybe
            base = self.resolve(node.child_by_field_name("object"), depth + 1)
            attribute = node.child_by_field_name("attribute")
            if base is None or attribute is None:
                return None
            members = self.members(base)
            if members is None or ANY_ATTRIBUTE in members:
                return None
            member = members.get(_text(attribute))
            if member is None or not member.has_members:
                return None
            return (*base, member.name)
        if kind == "call":
            callee = self.callee(node.child_by_field_name("function"), depth + 1)
            if callee is not None and callee[0] == "builtins" and len(callee) == 2:
                # a builtin: `open(p, "rb")` by its mode; other functions but `sorted`
                # return what their arguments decide
                return self.scopes.opened(node) if callee[1] == "open" else (*callee, CALL) if self.scopes.builtin(callee[1]) else None
            return (*callee, CALL) if callee is not None else None
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.resolve(node.named_children[0], depth + 1)
        return self.scopes.literal(node)

    def callee(self, function, depth: int = 0) -> tuple[str, ...] | None:
        """The index path of a called expression that names a known, non-module member
        (``np.zeros``, ``a.copy`` of a typed ``a``, ``LinearRegression`` imported from
        its module); None otherwise."""
        if function is None:
            return None
        if function.type == "identifier":
            path = self.roots.get(_text(function))
            if path is None and self.scopes.typed(function, _text(function)) is None:
                path = self.scopes.builtin(_text(function)) or self.scopes.builtin_function(_text(function))
            if path is None or len(path) < 2:
                return None
            base, name = tuple(path[:-1]), path[-1]
        elif function.type == "attribute":
            attribute = function.child_by_field_name("attribute")
            if attribute is None:
                return None
            name = _text(attribute)
            if name.startswith("__"):
                return None  # Cls.__new__(Cls), obj.__call__(): the protocol says nothing of the type
            base = self.resolve(function.child_by_field_name("object"), depth + 1)
            if base is None:
                return None
            if CALL in base and self.scopes.defines(name):
                return None  # a method of the document's classes may override the library's
        else:
            return None
        members = self.members(base)
        if members is None or ANY_ATTRIBUTE in members:
            return None
        member = members.get(name)
        if member is None or member.kind == "module":
            return None
        return (*base, name)

    def written(self, node) -> str:
        text = _SPACE.sub("", _text(node))
        return text if len(text) <= 48 else text[:20] + "…" + text[-20:]

    def attribute(self, node) -> None:
        attribute = node.child_by_field_name("attribute")
        receiver = node.child_by_field_name("object")
        if attribute is None or receiver is None:
            return
        name = _text(attribute)
        if _dunder(name) or name in self.assigned or self.is_target(node):
            return
        path = self.resolve(receiver)
        if path is None:
            return
        members = self.members(path)
        kind = "receiver" if CALL in path else "attribute"
        self.count(kind)
        if members is None:
            return
        if name in members and members[name].deprecated:
            self.deprecation(attribute, f"{self.written(receiver)}.{name}", path, members[name])
            return
        parent = node.parent
        called = parent is not None and parent.type == "call" and parent.child_by_field_name("function") == node
        if ANY_ATTRIBUTE in members:
            if members[ANY_ATTRIBUTE].kind != "values" or name in members or not called:
                return
            version = self.version(path[0])
            message = (
                f"{self.written(receiver)}.{name} is not a method{' in ' + version if version else ''} "
                "(other attributes are data, such as columns, and cannot be called)"
            )
            self.add(kind, attribute, attribute, f"{self.written(receiver)}.{name}", message, (version,), path, name)
            return
        if name in members or self.dynamic(path, name):
            return
        written = f"{self.written(receiver)}.{name}"
        note, lacking = self.lacking(path, name)
        if not note and self.own_instance(receiver):
            # ``self.x``: the instance may be of a subclass, in this file or another, that
            # has x (``self.locktype`` in a base test class whose subclasses set it);
            # reported only where a version target shows a version of the base that has x
            return
        if note:
            message = f"{written}: {note}"
        else:
            version = self.version(path[0])
            where = f" in {version}" if version else ""
            if CALL in path:
                message = f"{written} does not exist{where} ({self.written(receiver)} is {self.describe_value(path)})"
            else:
                message = f"{written} does not exist{where}"
        self.add(kind, attribute, attribute, written, message, lacking, path, name)

    def own_instance(self, receiver) -> bool:
        """Whether the receiver is ``self``/``cls`` of a method of the document's class
        (in parentheses too)."""
        while receiver is not None and receiver.type == "parenthesized_expression" and receiver.named_child_count == 1:
            receiver = receiver.named_children[0]
        return receiver is not None and receiver.type == "identifier" and self.scopes.own_instance(receiver, _text(receiver))

    def path_kind(self, path: tuple[str, ...]) -> str:
        """"module", "class", "instance" (what a call returns), or the index's kind of
        the last member of a path without a call."""
        if CALL in path:
            return "instance"
        if len(path) == 1:
            return "module"
        members = self.members(path[:-1])
        member = members.get(path[-1]) if members else None
        return member.kind if member is not None else "unknown"

    def dynamic(self, path: tuple[str, ...], name: str) -> bool:
        """Whether `name`, though the index does not list it, may be there at run time:
        a submodule of a package (any import loads it: ``import urllib.request`` makes
        ``urllib.error`` exist); a private name of something that is not a module (a
        class's or an object's internals); any attribute of an object a module holds (its
        state is set at run time: ``EXTENSIONS.path = ...`` elsewhere).  Where the index
        cannot list a module's submodules (a snapshot, no runtime introspection), its
        members are taken as the whole module, as completions take them."""
        kind = self.path_kind(path)
        if kind == "module":
            modules = self.submodules(path)
            return modules is not None and name in modules
        if name.startswith("_"):
            return True
        return kind != "class" and CALL not in path

    def deprecation(self, node, written: str, path: tuple[str, ...], member: Member) -> None:
        """A use of a member that announces its deprecation (`Member.deprecated`): a hint,
        not an absence; the versions are those deprecating it (version targets) or the
        installed one."""
        from adaptrack_lsp.apis.deprecations import deprecation_note

        try:
            found = self.index.deprecated_in(path, member.name)
        except Exception:  # noqa: BLE001 - the versions only decorate the message
            found = None
        if found:
            targets, where = tuple(f"{found[0]} {v}" for v in found[1]), f" in {found[0]} {', '.join(found[1])}"
        else:
            version = self.version(path[0])
            targets, where = (version,) if version else (), f" in {version}" if version else ""
        message = deprecation_note(written, where, member.deprecated)
        self.add("deprecated", node, node, written, message, targets, path, member.name, deprecated=True)

    def describe_value(self, path: tuple[str, ...]) -> str:
        """What a typed path is, for a message: ``a np.ndarray``, ``what np.zeros() returns``."""
        callee = path[:-1]
        members = self._members.get((callee[:-1], True)) if len(callee) > 1 else None
        member = members.get(callee[-1]) if members else None
        if member is not None and member.kind == "class":
            return f"a {self.describe(callee)}"
        return f"what {self.describe(path)} returns"

    def describe(self, path: tuple[str, ...]) -> str:
        """A typed path as the document would write it: ``np.zeros()``."""
        best = None
        for alias, root in self.roots.items():
            if path[: len(root)] == tuple(root) and (best is None or len(root) > len(best[1])):
                best = (alias, tuple(root))
        return dotted((best[0], *path[len(best[1]) :])) if best is not None else dotted(path)

    @staticmethod
    def is_target(node) -> bool:
        """Whether the attribute is assigned or deleted here, not read."""
        child, parent = node, node.parent
        while parent is not None and parent.type in ("pattern_list", "tuple_pattern", "list_pattern", "tuple", "list", "expression_list"):
            child, parent = parent, parent.parent
        if parent is None:
            return False
        if parent.type in ("assignment", "augmented_assignment") and parent.child_by_field_name("left") == child:
            return True
        return parent.type == "delete_statement"

    def call(self, node) -> None:
        arguments = node.child_by_field_name("arguments")
        if arguments is None or arguments.type != "argument_list":
            return
        keywords = [child for child in arguments.named_children if child.type == "keyword_argument"]
        if not keywords:
            return
        callee = self.callee(node.child_by_field_name("function"))
        if callee is None:
            return
        key = (*callee, CALL)
        signature = self.signature(key)
        for keyword in keywords:
            name_node = keyword.child_by_field_name("name")
            if name_node is None:
                continue
            self.count("keyword")
            if signature is None:
                continue
            name = _text(name_node)
            problem = signature.keyword_problem(name)
            if problem is None:
                continue
            function = node.child_by_field_name("function")
            written = self.written(function)
            note, lacking = self.lacking(key, name, keyword=True)
            version = self.version(callee[0])
            where = f" in {version}" if version else ""
            if note:
                message = f"{written}: keyword {name} {note}"
            elif problem == "positional-only":
                message = f"{written}: {name} is positional-only{where} (parameters: {signature.parameter_list()})"
            else:
                parameters = f" (parameters: {signature.parameter_list()})" if signature.parameters else " (it takes no parameters)"
                message = f"{written} takes no keyword {name}{where}{parameters}"
            self.add("keyword", name_node, name_node, f"{written}({name}=)", message, lacking, key, name)
