"""The constraint environment: which API validates completions, and the token
constraint assembled from it (the one place, used by the server, the CLI and the
evaluation).

`ConstraintEnvironment` keeps one API index per environment (interpreter, snapshot,
introspection and trust settings, workspace): a `JediIndex` of the user's environment
or a `SnapshotIndex` (setting `apiSnapshot`), with a `ConstraintInfo` saying where
validity comes from and why.  Index look-ups of a document's imports start on the
index thread (`warm_up`), never on the model thread; `pending` lists the paths a
cursor needs that are still being computed.

`text_constraint` composes the text-level constraint of one generation (the API monitor
over an index or a `ReadyOnlyIndex` view of it, AND keyword names in resolved calls, AND
the healed prefix, AND clean text, AND Python syntax when asked for); `token_constraint`
is that over the model's vocabulary, ANDed at the token level with a grammar when one is
given: what a decoder uses.  `adaptrack-lsp explain` checks texts with `text_constraint`
directly.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from adaptrack_lsp.config import Settings

logger = logging.getLogger(__name__)

IndexFactory = Callable[[Settings, "str | None"], Any]


@dataclass
class ConstraintInfo:
    """Where validity came from for one request."""

    #: "jedi" (live environment), "snapshot" (JSON file) or "none" (unconstrained)
    source: str = "none"
    #: the Python interpreter (jedi) or the snapshot file
    environment: str | None = None
    #: top-level package -> version for the packages the constraint answered about
    packages: dict[str, str] = field(default_factory=dict)
    #: why completions are not API-constrained although they should be ("" when fine)
    problem: str = ""
    #: which environment validates completions and why it was chosen
    reason: str = ""
    #: the Python syntax constraint: "" (not asked for), "on", or "off: <why>" (e.g. the
    #: text before the cursor already has a syntax error)
    syntax: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TextConstraint:
    """The text-level constraint for one generation: the composed `Constrainer` (None
    when nothing constrains), the context it starts from, and the parts that were asked
    for but turned themselves off for this request (``"syntax: <reason>"``)."""

    constrainer: Any
    context: Any
    off: tuple[str, ...] = ()


def syntax_status(asked: bool, off) -> str:
    """`ConstraintInfo.syntax` of a request: "" (not asked for), "on", or "off: <why>"
    from a constraint's `off` notes."""
    if not asked:
        return ""
    for note in off:
        if note.startswith("syntax: "):
            return "off: " + note.removeprefix("syntax: ")
    return "on"


def text_constraint(
    *,
    index=None,
    document: str = "",
    prefix: str = "",
    roots: Mapping[str, tuple[str, ...]] | None = None,
    forced_prefix: str = "",
    clean: bool = False,
    keywords_index=None,
    keyword_choices=None,
    syntax: bool = False,
    suffix: str = "",
    local_modules: frozenset[str] = frozenset(),
    assigned_attributes: frozenset[str] = frozenset(),
    analysis=None,
) -> TextConstraint:
    """The text-level constraint for one generation after `prefix` in `document`
    (`suffix`: the document after the cursor).

    Parts, all of which must accept: `CleanText` (`clean`: no control characters or
    U+FFFD), `ForcedPrefix(forced_prefix)` (token healing), `ApiMonitor(index)` with the
    document's import `roots` (learned from `document` when None),
    `local_modules` (names an import finds beside the document: never rejected),
    `assigned_attributes` (names the document assigns on objects: never rejected on
    a typed receiver),
    `KeywordArguments(keywords_index)` (keyword names in resolved calls are parameters
    of the signatures `keywords_index` gives; usually the same index or view),
    `KeywordChoice(keyword_choices)` (the text is one of ``name=``: completion-list
    keyword items), and `PythonSyntax` (`syntax`: prefix + text stays a prefix of a
    valid program; off for this request, with the reason in `off`, when the prefix
    already has a syntax error).  `analysis`: the document's (`apis.document`), built once
    per request and read by every part (None: read from `document`).  A fresh monitor per call: monitors cache "unknown"
    answers, and an answer that was not ready last time may be ready now (the index
    caches)."""
    from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext

    parts = []
    off: list[str] = []
    if clean:
        from adaptrack_lsp.constrainers.clean_text import CleanText

        parts.append(CleanText())
    if forced_prefix:
        from adaptrack_lsp.constrainers.compose import ForcedPrefix

        parts.append(ForcedPrefix(forced_prefix))
    if keyword_choices:
        from adaptrack_lsp.constrainers.call_arguments import KeywordChoice

        parts.append(KeywordChoice(keyword_choices))
    if index is not None:
        parts.append(ApiMonitor(index, roots=roots, local_modules=local_modules, assigned_attributes=assigned_attributes))
    if keywords_index is not None:
        from adaptrack_lsp.constrainers.call_arguments import KeywordArguments

        parts.append(KeywordArguments(keywords_index, roots=roots))
    if syntax:
        from adaptrack_lsp.constrainers.python_syntax import PythonSyntax, SyntaxCheckOff

        checker = PythonSyntax(suffix=suffix)
        try:
            checker.prepare(prefix)
        except SyntaxCheckOff as reason:
            logger.info("syntax constraint off for this request: %s", reason)
            off.append(f"syntax: {reason}")
        else:
            parts.append(checker)
    context = ConstraintContext(document=document, prefix=prefix, analysis=analysis)
    if not parts:
        return TextConstraint(None, context, tuple(off))
    if len(parts) == 1:
        return TextConstraint(parts[0], context, tuple(off))
    from adaptrack_lsp.constrainers.compose import AllOf

    return TextConstraint(AllOf(*parts), context, tuple(off))


def token_constraint(vocab, *, grammar=None, **parts):
    """The id-level constraint for one generation: `text_constraint(**parts)` over the
    model's vocabulary (`Unconstrained` when no part constrains), ANDed at the token
    level with `grammar` (a `GrammarSpec`: the generated text must stay a prefix of the
    grammar's language).  Its `off` lists the parts that turned themselves off for this
    request."""
    from adaptrack_lsp.constrainers.base import Unconstrained
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    text = text_constraint(**parts)
    grammar_part = None
    if grammar is not None:
        from adaptrack_lsp.constrainers.grammar import grammar_constraint

        grammar_part = grammar_constraint(vocab, grammar)
    if text.constrainer is None:
        constraint = grammar_part if grammar_part is not None else Unconstrained(vocab)
    else:
        constraint = TokenIndex(text.constrainer, vocab, context=text.context)
        if grammar_part is not None:
            from adaptrack_lsp.constrainers.compose import TokenAllOf

            constraint = TokenAllOf(constraint, grammar_part)
    constraint.off = text.off
    return constraint


class ConstraintEnvironment:
    """API indexes per environment, built once, and their look-ups in the background."""

    def __init__(self, workspace_root: str | None = None, index_factory: IndexFactory | None = None):
        self.workspace_root = workspace_root
        self._index_factory = index_factory
        self._indexes: dict[tuple, tuple[Any, ConstraintInfo]] = {}
        self._lock = threading.Lock()
        self._thread = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="adaptrack-index")
        self._warm_lock = threading.Lock()
        self._warm_texts: dict[str, str] = {}
        self._warm_futures: dict[str, concurrent.futures.Future] = {}
        #: paths waited for -> callbacks (`when_ready`)
        self._waiters: dict[frozenset, list[Callable[[bool], None]]] = {}
        self._closed = False
        #: version targets (setting versionTargets): each step of preparing them, and
        #: their end (the problem, "" when ready); set by the server and the CLI
        self.target_progress: Callable[[str], None] | None = None
        self.target_finished: Callable[[str], None] | None = None
        #: a version target that cannot be built is the index's problem (``--strict-targets``)
        self.strict_targets = False

    def key(self, settings: Settings) -> tuple:
        """What an index depends on: settings that change it give another index."""
        return (
            settings.python_path,
            settings.api_snapshot,
            settings.runtime_introspection,
            settings.trusted_workspace,
            self.workspace_root,
            tuple(settings.version_targets),
        )

    def forget(self) -> None:
        """Drop the cached indexes (the settings that choose them changed)."""
        with self._lock:
            self._indexes.clear()

    def api_index(self, settings: Settings) -> tuple[Any, ConstraintInfo]:
        """(APIIndex or None, info) for the settings' environment, built once and cached;
        None (with `info.problem`) when the environment cannot validate completions."""
        key = self.key(settings)
        with self._lock:
            cached = self._indexes.get(key)
            if cached is not None and cached[0] is not None and getattr(cached[0], "problem", ""):
                # the environment failed after the index was made (e.g. it stopped answering)
                index = cached[0]
                cached = self._indexes[key] = (
                    None,
                    ConstraintInfo(source="none", environment=getattr(index, "python", None), problem=index.problem),
                )
            if cached is None:
                cached = self._indexes[key] = self._make_index(settings)
            return cached

    def _make_index(self, settings: Settings) -> tuple[Any, ConstraintInfo]:
        try:
            if self._index_factory is not None:
                index = self._index_factory(settings, self.workspace_root)
                if index is None:
                    return None, ConstraintInfo(source="none")
                return self._with_targets(index, ConstraintInfo(source=getattr(index, "source", "") or "custom"), settings)
            if settings.api_snapshot:
                from adaptrack_lsp.apis.index import SnapshotIndex

                index = SnapshotIndex(settings.api_snapshot)
                info = ConstraintInfo(source="snapshot", environment=str(settings.api_snapshot), reason="setting apiSnapshot")
                return self._with_targets(index, info, settings)
            from adaptrack_lsp.apis.index import JediIndex

            index = JediIndex(
                python=settings.python_path,
                workspace=self.workspace_root,
                timeout_s=settings.timeout_ms / 1000.0,
                runtime_introspection=settings.runtime_introspection,
                trusted_workspace=settings.trusted_workspace,
            )
        except Exception as error:
            logger.warning("API index unavailable: %s", error)
            return None, ConstraintInfo(source="none", environment=settings.api_snapshot or settings.python_path, problem=str(error))
        if index.problem:
            return None, ConstraintInfo(
                source="none", environment=settings.python_path, problem=index.problem, reason=index.describe()
            )
        return self._with_targets(index, ConstraintInfo(source="jedi", environment=index.python, reason=index.describe()), settings)

    def _with_targets(self, index, info: ConstraintInfo, settings: Settings) -> tuple[Any, ConstraintInfo]:
        """`index` combined with the snapshots of the settings' version targets
        (`apis.targets.TargetsIndex`; prepared on first use), or as it is without targets."""
        if not settings.version_targets:
            return index, info
        from adaptrack_lsp.apis.targets import TargetsIndex

        try:
            combined = TargetsIndex(index, settings.version_targets, progress=self.target_progress, strict=self.strict_targets)
        except ValueError as error:
            return None, ConstraintInfo(source="none", environment=info.environment, problem=str(error))
        info = ConstraintInfo(source=info.source, environment=info.environment, reason=combined.describe())
        told = self.target_finished

        def finished(problem: str) -> None:
            info.reason = combined.describe()  # the versions checked, once known
            if told is not None:
                told(problem)

        combined.finished = finished
        return combined, info

    def target_note(self) -> str:
        """What a status line says of the version targets besides "ready": the targets
        that could not be built and the modules found unchecked under one
        (`TargetsIndex.status_note`); "" when there is nothing to say."""
        with self._lock:
            indexes = [entry[0] for entry in self._indexes.values()]
        notes = []
        for index in indexes:
            note = getattr(index, "status_note", None)
            text = note() if callable(note) else ""
            if text:
                notes.append(text)
        return "; ".join(notes)

    def describe(self, settings: Settings) -> str:
        """One line: which environment (or snapshot) validates completions, and why."""
        _, info = self.api_index(settings)
        if info.reason:
            return info.reason
        if info.problem:
            return f"completions are not API-constrained ({info.problem})"
        return f"API constraint: {info.source}"

    @staticmethod
    def pending(index, paths) -> list[tuple[str, ...]]:
        """The `paths` `index` has not answered yet; their look-ups are started."""
        if index is None:
            return []
        waiting = [tuple(path) for path in paths if not index.ready(tuple(path))]
        for path in waiting:
            index.prefetch(path)
        return waiting

    def when_ready(self, settings: Settings, paths, callback: Callable[[bool], None], limit_s: float) -> None:
        """Call `callback(answered)` once the index has answered `paths` (or after
        `limit_s`), from a waiting thread; one waiter per set of paths."""
        index, _ = self.api_index(settings)
        key = frozenset(tuple(p) for p in paths)
        if index is None or not key or self._closed:
            return
        with self._warm_lock:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.append(callback)
                return
            callbacks = self._waiters[key] = [callback]

        def wait() -> None:
            try:
                answered = bool(index.wait_ready(list(key), limit_s))
            except Exception:
                logger.debug("waiting for the index failed", exc_info=True)
                answered = False
            with self._warm_lock:
                self._waiters.pop(key, None)
            for function in callbacks:
                try:
                    function(answered and not self._closed)
                except Exception:
                    logger.exception("index-ready callback failed")

        threading.Thread(target=wait, name="adaptrack-index-wait", daemon=True).start()

    def warm_up(self, settings: Settings, text: str, document: str = "") -> concurrent.futures.Future | None:
        """Start the look-ups of the document's imports on the index thread; the future
        gives the number of paths asked for.  Calls for the same `document` while one is
        queued only update the text it reads."""
        if self._closed:
            return None
        if document:
            with self._warm_lock:
                queued = document in self._warm_texts
                self._warm_texts[document] = text
                if queued:
                    return self._warm_futures.get(document)

        def job():
            from adaptrack_lsp.apis.imports import document_roots

            with self._warm_lock:
                latest = self._warm_texts.pop(document, text) if document else text
            roots = document_roots(latest)
            if not roots:
                return 0
            index, _ = self.api_index(settings)
            if index is None:
                return 0
            asked = 0
            for path in dict.fromkeys(roots.values()):
                try:
                    index.prefetch(path)
                    asked += 1
                except Exception:
                    logger.debug("warm-up of %s failed", ".".join(path), exc_info=True)
            return asked

        try:
            future = self._thread.submit(job)
        except RuntimeError:  # shut down
            return None
        if document:
            with self._warm_lock:
                self._warm_futures[document] = future
        return future

    def close(self) -> None:
        """Stop the index thread and the indexes' introspection workers."""
        self._closed = True
        self._thread.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            indexes = [index for index, _ in self._indexes.values() if index is not None]
            self._indexes.clear()
        for index in indexes:  # stops runtime introspection workers (their process groups)
            try:
                index.close()
            except Exception:
                logger.debug("closing an API index failed", exc_info=True)
