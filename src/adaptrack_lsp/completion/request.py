"""One completion request, built once where it arrives and carried to the answer.

`CompletionRequest` holds everything later steps need about the cursor, derived once
from the document snapshot the request was made on: the text (made safe for
tokenizers), the cursor offset, the partial word typed before it, the modules the
document's imports bind, the settings in force, the seed and the project context (the
snippets of other open documents and imported workspace modules, `project_context.py`,
gathered once from the sources the server holds when the request arrives).  The prompt
plan, the constraint and the response are built from it; nothing re-reads the document
or the other files.

`RequestControl` is the one place that says whether a running request must stop, and
why: the client cancelled it, a newer request for the same document superseded it, or
the decode needs API members that are still being computed.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from adaptrack_lsp.apis.document import DocumentAnalysis, analysis_of
from adaptrack_lsp.apis.index import CALL, call_key, members_key
from adaptrack_lsp.apis.project_attributes import assigned_beside
from adaptrack_lsp.apis.receivers import AssignedNames, assigned_names, receivers_at
from adaptrack_lsp.completion.project_context import ContextSources, ProjectContext, document_path, gather_context
from adaptrack_lsp.config import Settings

MODES = ("inline", "list")
#: the identifier characters typed right before the cursor on its line
_WORD_TAIL = re.compile(r"\w*\Z")
#: an attribute chain ending at the cursor (``tf.compat.v1.pla``)
_SURROGATE = re.compile("[\ud800-\udfff]")
_CURSOR_CHAIN = re.compile(r"(?<![\w.])([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*\w*\Z")


def sanitize_text(text: str) -> str:
    """Text safe for tokenizers: lone surrogates (undecodable input) become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)  # one character for one: offsets stay


def request_seed(text: str, offset: int, mode: str) -> int:
    """A stable 64-bit seed for a completion at `offset` of `text` (same input, same samples)."""
    digest = hashlib.blake2b(f"{mode}\0{offset}\0{text}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class CompletionRequest:
    """A cursor in one document snapshot, with what every later step needs about it."""

    #: the document text (lone surrogates replaced) and the cursor's character offset
    text: str
    offset: int
    #: "inline" (ghost text) or "list" (completion list)
    mode: str
    settings: Settings
    #: the document's key (its URI): supersession and the model's prompt cache slot
    document: str = ""
    #: the document version the request was made on (None when unknown, e.g. the CLI)
    version: int | None = None
    #: the samples' seed (default: derived from the text, the cursor and the mode)
    seed: int = 0
    #: identifier characters typed before the cursor on its line (the edit replaces them)
    typed_word: str = ""
    #: alias -> module path bound by the document's imports (parsed once)
    import_roots: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: name -> typed path (ending in "()") for the names visible at the cursor whose
    #: type the document states (`apis.receivers`: ``a = np.zeros(3)``, ``def f(a:
    #: np.ndarray)``)
    receivers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: module names beside the document (its folder's .py files and packages): what a
    #: script's ``import helper`` finds, though no environment lists it
    local_modules: frozenset[str] = frozenset()
    #: attribute names the document assigns on objects (``server.wfile = f``): never
    #: rejected on a typed receiver (`apis.receivers.assigned_names`)
    assigned_attributes: frozenset[str] = frozenset()
    #: the API index paths the completion needs before decoding: the imported modules'
    #: members, each prefix of the chain at the cursor (``tf.compat.v1.`` -> tensorflow,
    #: tensorflow.compat, tensorflow.compat.v1; after a typed receiver, ``a.`` -> what
    #: ``a`` has, `members_key`) and the open call's callee and signature
    needed_paths: tuple[tuple[str, ...], ...] = ()
    #: the part of them that is the attribute chain at the cursor (`chain_paths`)
    chain_paths: tuple[tuple[str, ...], ...] = ()
    #: snippets of other files for the prompt (None: no context, or `contextTokens` 0)
    context: ProjectContext | None = None
    #: the document's syntax (`apis.document.DocumentAnalysis` of `text`): read once here,
    #: carried to every reader (the constraint's parts, the context planner, the checks)
    analysis: DocumentAnalysis | None = field(default=None, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        text: str,
        offset: int,
        *,
        mode: str = "inline",
        settings: Settings | None = None,
        document: str = "",
        version: int | None = None,
        seed: int | None = None,
        sources: ContextSources | None = None,
        analysis: DocumentAnalysis | None = None,
    ) -> CompletionRequest:
        """`sources`: where project context may come from (open documents, the workspace
        root and its trust); None for no context.  `analysis`: the document's, where the
        caller keeps one (the server: edited incrementally per open document); used when
        it is of `text` (else the one kept for the text)."""
        if mode not in MODES:
            raise ValueError(f"mode must be 'inline' or 'list', got {mode!r}")
        text = sanitize_text(text)
        offset = max(0, min(int(offset), len(text)))
        line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1  # LSP line breaks
        line_prefix = text[line_start:offset]
        settings = settings or Settings()
        seed = request_seed(text, offset, mode) if seed is None else int(seed)
        # the document's analysis, then what is read of it (the cursor's paths last: the
        # open call's is the analysis's last answer)
        analysis = analysis_of(text, analysis)
        roots = analysis.roots
        receivers = receivers_at(analysis, offset, roots)
        context = None
        if sources is not None and settings.context_tokens != 0:
            from adaptrack_lsp.completion.context import MAX_AUTOMATIC_CONTEXT_TOKENS, MAX_CHARS_PER_TOKEN

            tokens = settings.context_tokens or MAX_AUTOMATIC_CONTEXT_TOKENS
            context = gather_context(document, analysis, sources, max_chars=tokens * MAX_CHARS_PER_TOKEN, offset=offset)
        assigned = _assigned_names(offset, analysis, roots, document) if receivers else frozenset()
        at_cursor = chain_paths(line_prefix, roots, receivers)
        # the modules the document imports and every prefix of the chain at the cursor
        needed = (*(members_key(path) for path in roots.values()), *at_cursor)
        if settings.keyword_arguments:
            needed += open_call_paths(analysis, offset, {**receivers, **roots})
        return cls(
            text=text,
            offset=offset,
            mode=mode,
            settings=settings,
            document=document,
            version=version,
            seed=seed,
            typed_word=_WORD_TAIL.search(text, line_start, offset).group(0),
            import_roots=roots,
            receivers=receivers,
            local_modules=modules_beside(document),
            assigned_attributes=assigned,
            needed_paths=tuple(dict.fromkeys(needed)),
            chain_paths=at_cursor,
            context=context,
            analysis=analysis,
        )

    @property
    def bound_names(self) -> dict[str, tuple[str, ...]]:
        """Every name the checks resolve: the typed receivers and the import aliases (an
        alias wins over a receiver of the same name)."""
        return {**self.receivers, **self.import_roots}

    @property
    def line_prefix(self) -> str:
        """The cursor line up to the cursor."""
        line_start = max(self.text.rfind("\n", 0, self.offset), self.text.rfind("\r", 0, self.offset)) + 1
        return self.text[line_start : self.offset]

    @property
    def paths_before_decoding(self) -> tuple[tuple[str, ...], ...]:
        """What must be answered before any decode: every needed path for a list; for
        ghost text only the chain at the cursor (the rest may still be computed: that
        answer leaves their members out, see `completion.pipeline`)."""
        return self.chain_paths if self.mode == "inline" else self.needed_paths

    @property
    def decoder(self) -> str:
        """The decoder the settings name for this mode (`decoder` / `listDecoder`)."""
        return self.settings.decoder if self.mode == "inline" else self.settings.list_decoder


def _assigned_names(offset: int, analysis: DocumentAnalysis, roots, document: str) -> frozenset[str]:
    """`assigned_names` for a cursor, with the names the files the document
    leans on assign (`project_attributes.assigned_beside`) and whether its class may
    still grow (`AssignedNames.class_open`)."""
    names = assigned_names(analysis, roots)
    beside = assigned_beside(document_path(document), analysis)
    open_paths = names.open_paths if isinstance(names, AssignedNames) else ()
    if beside or open_paths:
        names = AssignedNames(names | beside, open_paths, class_open=bool(open_paths) and analysis.class_runs_to_end(offset))
    return names


#: folder -> (its modification time, when it was listed, the module names it offers)
_FOLDER_MODULES: dict[str, tuple[int, float, frozenset[str]]] = {}
#: folders whose listing is kept
FOLDERS_KEPT = 64
#: a listing made this soon after the folder changed is made again (a file system whose
#: clock is coarse may show the next change with the same time)
SETTLE_S = 2.0


def modules_beside(document: str) -> frozenset[str]:
    """The module names a file's folder offers (``helper.py``, ``pkg/``), for a document
    given as a ``file:`` URI or a path; empty for anything else.  Only names are read,
    and again only when the folder has changed since (every keystroke asks)."""
    found = document_path(document)
    if found is None:
        return frozenset()
    folder = os.path.dirname(os.path.abspath(found))
    try:
        changed = os.stat(folder).st_mtime_ns
    except OSError:
        return frozenset()
    kept = _FOLDER_MODULES.get(folder)
    if kept is not None and kept[0] == changed and kept[1] - changed / 1e9 > SETTLE_S:
        return kept[2]
    listed = time.time()
    names = set()
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries):
                if count >= 5000:
                    break
                stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
                if stem.isidentifier() and (entry.name.endswith(".py") or entry.is_dir()):
                    names.add(stem)
    except OSError:
        return frozenset()
    if len(_FOLDER_MODULES) >= FOLDERS_KEPT:
        _FOLDER_MODULES.clear()
    offered = frozenset(names)
    _FOLDER_MODULES[folder] = (changed, listed, offered)
    return offered


def chain_paths(
    line_prefix: str, roots: dict[str, tuple[str, ...]], receivers: dict[str, tuple[str, ...]] | None = None
) -> tuple[tuple[str, ...], ...]:
    """The index keys of every prefix of the attribute chain at the end of `line_prefix`
    from its imported root or typed receiver on (``tf.compat.v1.`` -> tensorflow,
    tensorflow.compat, tensorflow.compat.v1); () when the cursor is not on such a chain."""
    match = _CURSOR_CHAIN.search(line_prefix)
    if not match:
        return ()
    names = [name.strip() for name in match.group(1).split(".")]
    root = roots.get(names[0]) or (receivers or {}).get(names[0])
    if not root:
        return ()
    chain = tuple(root) + tuple(names[1:])
    return tuple(members_key(chain[:depth]) for depth in range(len(root), len(chain) + 1))


def open_call_paths(analysis: DocumentAnalysis, offset: int, names: dict[str, tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """The index paths the call the cursor is in needs (keyword arguments): the callee's
    parent's members and the call's signature (``tf.nn.dropout(x, `` -> tensorflow.nn,
    tensorflow.nn.dropout()); () unless the innermost bracket open at `offset` (the
    analysis's `open_call`) is a call whose callee resolves through `names` (import
    aliases and typed receivers)."""
    call = analysis.open_call(offset)
    if call is None or call.nested or call.callee is None:
        return ()
    head, *rest = (part.strip() for part in call.callee.split("."))
    root = names.get(head)
    if root is None:
        return ()
    key = call_key((*root, *rest))
    callee = key[:-1]
    needs = [callee[:-1]] if CALL not in callee and len(callee) > 1 else []
    return (*needs, key)


#: why a request stopped, most decisive first
SUPERSEDED, CANCELLED, INDEX_PENDING = "superseded", "cancelled", "index pending"


class RequestControl:
    """Whether a running request must stop, and why (the one place that decides it).

    Decoders poll `should_stop` between LM calls; when one stops, `stop_reason` says
    whether the client cancelled, a newer request superseded this one, or the decode
    asked for API members still being computed (`index_pending`, set per decode).
    """

    def __init__(
        self,
        cancelled: Callable[[], bool] | None = None,
        superseded: Callable[[], bool] | None = None,
    ):
        self._cancelled = cancelled
        self._superseded = superseded
        self.index_pending: Callable[[], bool] | None = None

    def stop_reason(self) -> str | None:
        if self._superseded is not None and self._superseded():
            return SUPERSEDED
        if self._cancelled is not None and self._cancelled():
            return CANCELLED
        if self.index_pending is not None and self.index_pending():
            return INDEX_PENDING
        return None

    def should_stop(self) -> bool:
        return self.stop_reason() is not None

    def cancelled_by_client(self) -> str | None:
        """"superseded" / "cancelled" when the client no longer wants the answer."""
        reason = self.stop_reason()
        return reason if reason in (SUPERSEDED, CANCELLED) else None
