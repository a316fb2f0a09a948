"""Quick fixes for the checker's findings: version-correct rewrites decoded with AdapTrack
(`adaptrack-lsp check --suggest`, the editor's "Rewrite with a version-correct API"
code action; docs/check.md, "Quick fixes").

For one finding, `Suggester`:

1. **finds what to rewrite** (`fix_target`).  The edit covers the *offending
   expression*: the attribute chain the finding is in, from its first name to the end
   of its call (``np.product([1, 2])``, ``a.ptp()``, ``tf.placeholder(tf.float32,
   shape=[None, 3])``), or the chain alone where it is not called (``dtype=np.float_``);
   the keyword argument for a keyword (``normed=True`` in ``np.histogram(x,
   normed=True)``: the argument, not the whole call); the imported name or module for
   an import.  What is *decoded* is the name part: the chain (the callee of a call: the
   call's arguments are kept as written), or the keyword's name (its value is kept).
   A method that becomes a function takes its object as the first argument
   (``a.ptp(axis=1)`` -> ``np.ptp(a, axis=1)``), and an imported name keeps its binding
   (``from numpy import trapz`` -> ``from numpy import trapezoid as trapz``);
2. **decodes it** with the configured model and the ``adaptrack`` decoder, under the
   token constraint completions use, over the same API index the check used (version
   targets included), and under `FixShape` (a chain starts at the document's import
   aliases or the chain's own object and, for a call, is called; a keyword is one the
   call's signature still takes).  The prompt is the document up to the start of the
   expression; for a model with fill-in-the-middle tokens the rest of its line after
   the decoded part (a call's arguments included) is the suffix.  One greedy decode and
   `SAMPLES` samples at temperature 1 give the candidates, de-duplicated and ranked by
   their probability; those less probable than the best by more than
   `MAX_LOGPROB_GAP` are left out.  The prompt alone does not say what the flagged code
   meant, so the model's next-token distribution is mixed with a copy of the flagged
   name (`IntentPrior`, weight `INTENT_WEIGHT`): where it still spells a valid prefix
   (``np.prod`` of ``np.product``) the model is pulled to keep it; where it is invalid
   the constraint removes it and the model's own choice decides;
3. **keeps only what the check accepts** (`Suggester.accept`): the edited document is
   checked again with the same `Checker`; a candidate that leaves a finding overlapping
   the edited range, adds any finding or region that does not parse, or makes a file
   that `ast` parses unparsable, is dropped.

At most `MAX_SUGGESTIONS` replacements are offered, each ``{"text", "start", "end"}``
with 1-based line and column in characters, end exclusive, of the range replaced.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel
from adaptrack_lsp.constrainers.base import Constrainer

logger = logging.getLogger(__name__)

__all__ = ["FixShape", "FixTarget", "IntentPrior", "Suggester", "chain_end", "fix_target"]

#: replacements offered per finding, at most
MAX_SUGGESTIONS = 3
#: samples drawn besides the greedy decode (ranked together by the model's probability)
SAMPLES = 6
#: a candidate less probable than the best by more than this (nats) is not offered
MAX_LOGPROB_GAP = 4.0
#: candidates checked per finding, at most (most probable first)
MAX_CHECKED = 8
#: weight of the copy of the flagged name in the next-token distribution (0: the model alone)
INTENT_WEIGHT = 0.5
#: tokens a decoded name may take, at least (the settings' maxNewTokens when larger)
MIN_NEW_TOKENS = 32
#: decoding time per decode, at least (the settings' timeoutMs when larger)
MIN_DECODE_S = 10.0
#: decodes started again after waiting for API members they met, at most
MAX_INDEX_ROUNDS = 6
#: longest wait for the API members a decode needs (each round), in seconds
INDEX_WAIT_S = 60.0

#: what is decoded: "call" (the callee of a call, its arguments kept), "name" (a chain,
#: an imported name or module), "argument" (a keyword's name, its value kept)
SHAPES = ("call", "name", "argument")
_KEYWORD_ARGUMENT = re.compile(r"[^\W\d]\w*\s*=(?!=)")
_IMPORT_STATEMENTS = ("import_statement", "import_from_statement")


@dataclass(frozen=True)
class FixTarget:
    """What a fix replaces: the character offsets [start, end) of the document and the
    part [start, decoded_end) the model writes anew."""

    start: int
    end: int
    shape: str
    #: the text replaced
    original: str
    #: where the decoded part ends (the rest, up to `end`, is kept: a call's arguments, a keyword's value)
    decoded_end: int
    #: "chain" (an attribute chain, maybe called), "argument" (a keyword argument) or
    #: "import" (a name or module of an import statement)
    where: str = "chain"
    #: what a chain may start with besides the import aliases: its first name (``np`` of
    #: ``np.product``), or the object of a flagged method (``a`` of ``a.ptp``)
    head: str = ""
    #: the object of a flagged method, given as the first argument when the callee
    #: decoded is not one of its members (``a.ptp()`` -> ``np.ptp(a)``)
    receiver: str = ""
    #: the text the copy of `IntentPrior` follows (the chain; ``.ptp`` of a method: its object
    #: is not copied; a call's ``(`` after it)
    copy: str = ""
    #: an imported name without ``as``: a bare replacement name is bound to the old one
    rebind: str = ""

    @property
    def kept(self) -> str:
        """The part of the original that every replacement keeps (a call's arguments)."""
        return self.original[self.decoded_end - self.start :]


def _byte_offset(text: str, offset: int) -> int:
    return len(text[:offset].encode("utf-8", "surrogatepass"))


def fix_target(text: str, finding) -> FixTarget | None:
    """What a fix for `finding` replaces in `text` (see the module docstring), or None
    where no rewrite is known (a chain over several lines, a finding whose range is not
    where the syntax tree says such a use is)."""
    from adaptrack_lsp.apis.document import analysis_of

    if not 0 <= finding.start < finding.end <= len(text):
        return None
    analysis = analysis_of(text)
    source, tree = analysis.data, analysis.tree
    start_byte, end_byte = _byte_offset(text, finding.start), _byte_offset(text, finding.end)
    node = tree.root_node.descendant_for_byte_range(start_byte, end_byte)
    if node is None:
        return None

    def chars(byte: int) -> int:
        return len(source[:byte].decode("utf-8", "surrogatepass"))

    def one_line(first: int, last: int) -> bool:
        return b"\n" not in source[first:last] and b"\r" not in source[first:last]

    def code(node) -> str:
        return node.text.decode("utf-8", "surrogatepass")

    statement = node
    while statement is not None and statement.type not in _IMPORT_STATEMENTS:
        statement = statement.parent
    if statement is not None:  # an imported name or module: the flagged text itself
        if not one_line(start_byte, end_byte):
            return None
        flagged = text[finding.start : finding.end]
        name = node if node.type == "dotted_name" else node.parent
        rebind = ""
        if (
            statement.type == "import_from_statement"
            and name is not None
            and name.type == "dotted_name"
            and any(child == name for child in statement.children_by_field_name("name"))
            and flagged.isidentifier()
        ):
            rebind = flagged
        return FixTarget(finding.start, finding.end, "name", flagged, finding.end, "import", copy=flagged, rebind=rebind)
    parent = node.parent
    if parent is not None and parent.type == "keyword_argument" and parent.child_by_field_name("name") == node:
        start, end = chars(parent.start_byte), chars(parent.end_byte)
        return FixTarget(start, end, "argument", text[start:end], finding.end, "argument", copy=code(node))
    if parent is None or parent.type != "attribute" or parent.child_by_field_name("attribute") != node:
        return None
    receiver_node = parent.child_by_field_name("object")
    chain = parent
    while chain.parent is not None and chain.parent.type == "attribute" and chain.parent.child_by_field_name("object") == chain:
        chain = chain.parent
    first = chain
    while first is not None and first.type in ("attribute", "call"):
        first = first.child_by_field_name("object" if first.type == "attribute" else "function")
    receiver = ""
    if finding.kind == "receiver" and receiver_node is not None:
        receiver = code(receiver_node)
        head = receiver
        copy = text[chars(receiver_node.end_byte) : chars(chain.end_byte)]  # ".ptp": the object is not copied
    else:
        head = code(first) if first is not None and first.type == "identifier" else ""
        copy = code(chain)
    if not one_line(chain.start_byte, chain.end_byte):
        return None
    call = chain.parent
    start, chain_end_at = chars(chain.start_byte), chars(chain.end_byte)
    if call is not None and call.type == "call" and call.child_by_field_name("function") == chain:
        end = chars(call.end_byte)  # the copy goes on to the call's "("
        return FixTarget(start, end, "call", text[start:end], chain_end_at, "chain", head, receiver, copy + "(")
    return FixTarget(start, chain_end_at, "name", text[start:chain_end_at], chain_end_at, "chain", head, receiver, copy)


def chain_end(text: str, start: int) -> int | None:
    """Where the name chain written in `text` from `start` on ends (the index of the
    first character after it that cannot continue it: ``(``, a space, an operator, a
    line break), or None while it goes on; blanks before it are skipped."""
    position = start
    length = len(text)
    while position < length and text[position] in " \t":
        position += 1
    while position < length:
        char = text[position]
        if not (char.isalnum() or char in "_."):
            return position
        position += 1
    return None


class FixShape(Constrainer):
    """What a decoded name must look like, a prefix-closed text constraint beside the
    API, keyword and syntax constraints:

    - a chain (`heads` given): it starts with one of `heads` followed by ``.`` (the
      document's import aliases and the flagged chain's first name or object), then
      goes on with names and dots (the API monitor checks each member); for "call" it
      is followed by the call's ``(`` (or ends: a model with fill-in-the-middle tokens
      sees the arguments after it), for "name" by neither ``(`` nor ``[``;
    - an imported name or module (no `heads`): a dotted name.
    """

    source = "the shape of a fix"

    def __init__(self, shape: str, heads: Iterable[str] | None = None):
        if shape not in ("call", "name"):
            raise ValueError(f"FixShape takes a call or a name, not {shape!r}")
        self.shape = shape
        self.heads = None if heads is None else tuple(sorted({f"{head}." for head in heads if head}))

    def start(self, context=None):
        return ("lead", "") if self.heads else ("chain", "")

    def check(self, state, text: str):
        phase, seen = state
        for char in text:
            if phase == "free":
                break
            if phase == "lead":
                if char in " \t" and not seen:
                    continue
                seen += char
                if not any(head.startswith(seen) for head in self.heads):
                    return None
                if seen in self.heads:
                    phase, seen = "chain", ""
                continue
            # phase "chain": names and dots (`seen`: the last character), then what may follow a chain
            if char.isalnum() or char in "_.":
                if not seen and (char.isdigit() or char == "."):
                    return None
                if char == "." and seen == ".":
                    return None
                seen = char
                continue
            if seen in ("", ".") or (self.shape == "call" and char != "(") or (self.shape == "name" and char in "(["):
                return None
            phase = "free"
        return ("free", "") if phase == "free" else (phase, seen)

    def is_complete(self, state) -> bool:
        phase, seen = state
        return phase == "free" or (phase == "chain" and seen not in ("", "."))

    def is_free(self, state) -> bool:
        return state[0] == "free"


# -- the copy of the flagged expression ------------------------------------------------------
_TOKENS_BY_TEXT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TOKENS_LOCK = threading.Lock()
#: a token longer than what it copies must share at least this many first characters with it
MIN_SHARED = 3


@dataclass(frozen=True)
class _CopyTables:
    """Per vocabulary: text -> the ordinary ids spelling it, the longest text, and the
    texts of `MIN_SHARED` characters or more by their first `MIN_SHARED` characters,
    lower-cased."""

    by_text: dict[str, list[int]]
    longest: int
    by_head: dict[str, list[tuple[int, str]]]


def _copy_tables(vocab) -> _CopyTables:
    with _TOKENS_LOCK:
        found = _TOKENS_BY_TEXT.get(vocab)
        if found is None:
            by_text: dict[str, list[int]] = {}
            by_head: dict[str, list[tuple[int, str]]] = {}
            special = vocab.special_ids
            for token_id, token in enumerate(vocab.texts):
                if token and token_id not in special:
                    by_text.setdefault(token, []).append(token_id)
                    if len(token) >= MIN_SHARED:
                        by_head.setdefault(token[:MIN_SHARED].lower(), []).append((token_id, token))
            found = _CopyTables(by_text, min(64, max((len(t) for t in by_text), default=1)), by_head)
            _TOKENS_BY_TEXT[vocab] = found
        return found


def _shared(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    return length


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _aligned(generated: str, original: str) -> int | None:
    """Where in `original` the copy goes on after `generated`: after the first
    occurrence of the longest suffix of `generated` found in it (0 for nothing
    generated yet); None when no suffix is found.  A suffix that starts with a word
    character must start a word in both texts (``dtype`` does not continue ``weights``
    after its ``e``)."""
    if not generated:
        return 0
    for length in range(min(len(generated), len(original)), 0, -1):
        piece = generated[-length:]
        inside_word = _word(piece[0])
        if inside_word and length < len(generated) and _word(generated[-length - 1]):
            continue
        found = original.find(piece)
        while found >= 0 and inside_word and found > 0 and _word(original[found - 1]):
            found = original.find(piece, found + 1)
        if found >= 0:
            return found + length
    return None


class IntentPrior(LanguageModel):
    """A model's next-token distribution mixed with a copy of the text a fix replaces:

        P'(u | x) = (1 - w) P(u | x) + w C(u | x),

    where C proposes the tokens that begin as what follows, in `original`, the longest
    suffix of the text generated so far: those spelling a prefix of it, and, for a
    member name (after a ``.``), those longer that share all but two characters of it,
    and at least `MIN_SHARED`, in any case (``float64`` for ``float_``, ``nan`` for
    ``NaN``); each is weighted by the characters it shares, squared.  C is empty
    (P' = P) where no token begins so.  Every token keeps a probability above zero
    where P gives one, so the constraint decides validity as for the model alone.
    A model with top-K distributions (a remote engine) is used as it is."""

    def __init__(self, base: LanguageModel, original: str, weight: float = INTENT_WEIGHT):
        self.base = base
        self.vocab = base.vocab
        self.original = original
        self.weight = float(weight)
        self.name = getattr(base, "name", "model")
        self._texts = base.vocab.texts
        self._tables = _copy_tables(base.vocab)
        self._proposals: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray] | None] = {}

    # what the prefix tree reads and sets on a model, forwarded
    @property
    def tokens_fed(self) -> int:  # type: ignore[override]
        return self.base.tokens_fed

    @property
    def server_calls(self) -> int:  # type: ignore[override]
        return getattr(self.base, "server_calls", 0)

    @property
    def max_context(self):  # type: ignore[override]
        return self.base.max_context

    @property
    def batched_nodes(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.base, "batched_nodes", False))

    @property
    def deadline(self):  # type: ignore[override]
        return self.base.deadline

    @deadline.setter
    def deadline(self, value) -> None:
        self.base.deadline = value

    def __getattr__(self, name: str):  # forward_seconds, kv_seconds, fim_format, ...
        if name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def set_prompt(self, prompt_ids, max_new_tokens: int = 0, cache_key=None):
        self._proposals.clear()
        return self.base.set_prompt(prompt_ids, max_new_tokens, cache_key)

    def encode(self, text: str) -> list[int]:
        return self.base.encode(text)

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        return self.mix(path, self.base.next_logprobs(path))

    def next_logprobs_batch(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        return [self.mix(path, logprobs) for path, logprobs in zip(paths, self.base.next_logprobs_batch(paths))]

    def proposals(self, path: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """(token ids, C over them) after `path`, or None when the copy proposes nothing."""
        key = tuple(path)
        if key in self._proposals:
            return self._proposals[key]
        generated = "".join(self._texts[i] if i < len(self._texts) else "" for i in key)
        found = None
        position = _aligned(generated, self.original)
        if position is not None and position < len(self.original):
            tables = self._tables
            rest = self.original[position : position + tables.longest]
            weights: dict[int, float] = {}
            for length in range(1, len(rest) + 1):
                for token_id in tables.by_text.get(rest[:length], ()):
                    weights[token_id] = float(length * length)
            word = re.match(r"\w*", rest).group(0)
            least = max(MIN_SHARED, len(word) - 2)  # most of the word the copy is in
            if len(word) >= least and position > 0 and self.original[position - 1] == ".":
                for token_id, token in tables.by_head.get(rest[:MIN_SHARED].lower(), ()):
                    if token_id not in weights:
                        shared = _shared(token.lower(), rest.lower())  # a rename may change case: NaN -> nan
                        if shared >= least:
                            weights[token_id] = float(shared * shared)
            if weights:
                values = np.fromiter(weights.values(), dtype=np.float64, count=len(weights))
                found = (np.fromiter(weights, dtype=np.int64, count=len(weights)), values / values.sum())
        self._proposals[key] = found
        return found

    def mix(self, path: Sequence[int], logprobs: np.ndarray) -> np.ndarray:
        if self.weight <= 0.0:
            return logprobs
        proposed = self.proposals(path)
        if proposed is None:
            return logprobs
        ids, copy = proposed
        values = np.asarray(logprobs, dtype=np.float64)
        with np.errstate(divide="ignore"):
            mixed = values + math.log1p(-self.weight) if self.weight < 1.0 else np.full_like(values, -np.inf)
            probs = (1.0 - self.weight) * np.exp(values[ids]) + self.weight * copy
            mixed[ids] = np.log(probs)
        return mixed.astype(np.asarray(logprobs).dtype, copy=False)


# -- decoding and checking ---------------------------------------------------------------------
@dataclass
class Proposal:
    """One decoded replacement of a target, with its probability under the model."""

    text: str
    logprob: float


class Suggester:
    """Decodes and checks version-correct replacements for the checker's findings.

    `settings`: the model (`settings.model`), its backend and the index settings;
    `environment`: the `ConstraintEnvironment` the check got its index from (the same
    index constrains the decode); `progress(text)`: a line for the user (the model
    load).  `host`: a loaded `ModelHost` to decode on (the language server's, whose
    caller runs `decode` on the model thread); without one the model is loaded on
    first use, with `model_loader` when given.  `checker`: the `Checker` the findings
    came from (one over the same index otherwise).  `intent_weight`: the weight of
    `IntentPrior` (0: the model alone)."""

    def __init__(
        self,
        settings,
        environment,
        progress: Callable[[str], None] | None = None,
        *,
        host=None,
        model_loader=None,
        checker=None,
        intent_weight: float = INTENT_WEIGHT,
        samples: int = SAMPLES,
        index_wait_s: float = INDEX_WAIT_S,
    ):
        self.settings = settings
        self.environment = environment
        self.progress = progress
        self._host = host
        self._own_host = host is None
        self._model_loader = model_loader
        self._checker = checker
        self.intent_weight = float(intent_weight)
        self.samples = int(samples)
        self.index_wait_s = float(index_wait_s)
        self._baseline: tuple[tuple[str, frozenset], object] | None = None
        self._lock = threading.Lock()
        #: what the last `decode` did: decodes, candidates, seconds, and the prompt it built
        self.last: dict = {}
        #: why no suggestion can be made (the model did not load); "" when they can
        self.problem = ""

    # -- the model and the index -----------------------------------------------------------
    @property
    def host(self):
        """The model host, loading the settings' model on first use."""
        if self._host is None:
            from adaptrack_lsp.completion.model_host import ModelHost

            host = ModelHost(self._model_loader)
            if self.progress is not None:
                self.progress(f"loading model {self.settings.model} for the suggestions")
            try:
                host.load(self.settings)
            except Exception as error:
                self.problem = str(error)
                if self.progress is not None:
                    self.progress(f"no suggestions: {error}")
                raise
            self._host = host
        return self._host

    def index(self):
        return self.environment.api_index(self.settings)[0]

    @property
    def checker(self):
        if self._checker is None:
            from adaptrack_lsp.checking.checker import Checker

            self._checker = Checker(self.index())
        return self._checker

    def close(self) -> None:
        """Stop the model thread of a host this suggester loaded itself."""
        if self._own_host and self._host is not None:
            self._host.close()

    # -- the whole path ----------------------------------------------------------------------
    def suggest(
        self,
        text: str,
        finding,
        path: str = "",
        *,
        local_modules: Iterable[str] = (),
        cancelled: Callable[[], bool] | None = None,
    ) -> list[dict]:
        """Up to `MAX_SUGGESTIONS` replacements for `finding` in `text` (the document at
        `path`), best first: ``{"text", "start": {"line", "column"}, "end": {...}}``."""
        target = fix_target(text, finding)
        if target is None or self.problem:
            return []
        try:
            proposals = self.decode(text, target, path, cancelled=cancelled)
        except Exception as error:  # the model could not load or run: findings without suggestions
            from adaptrack_lsp.completion.model_host import ServiceNotReady

            if not isinstance(error, ServiceNotReady):
                raise
            self.problem = self.problem or str(error)
            return []
        accepted = self.accept(text, target, proposals, local_modules=local_modules, cancelled=cancelled)
        return [edit(text, target, replacement) for replacement in accepted]

    # -- decoding (the model thread) ---------------------------------------------------------
    def decode(self, text: str, target: FixTarget, path: str = "", *, cancelled: Callable[[], bool] | None = None) -> list[Proposal]:
        """Replacements of `target`, most probable first (blocking model work; [] when
        `cancelled`)."""
        from adaptrack_lsp.apis.ready_index import ReadyOnlyIndex
        from adaptrack_lsp.completion.decoders import DecodeCancelled
        from adaptrack_lsp.completion.request import CompletionRequest, modules_beside, request_seed

        started = time.perf_counter()
        cancelled = cancelled or (lambda: False)
        host = self.host
        rest = text[target.decoded_end :]
        # built without the document's key: its parse cache follows the document as the
        # editor has it, not this text without the expression
        request = CompletionRequest.build(
            text[: target.start] + rest, target.start, mode="inline", settings=self.settings, seed=request_seed(text, target.start, "fix")
        )
        request = dataclasses.replace(request, document=path, local_modules=modules_beside(path))
        index = self.index()
        given_up: set[tuple[str, ...]] = set()
        if index is not None:
            self._wait(index, request.needed_paths, given_up, cancelled)
        found: dict[str, Proposal] = {}
        self.last = {"decodes": 0}
        # the greedy decode waits for the API members it meets (a decode that meets one
        # not computed yet stops, and runs again once it is)
        for _ in range(MAX_INDEX_ROUNDS):
            view = ReadyOnlyIndex(index, unknown=given_up) if index is not None else None
            pending = view.has_pending if view is not None else (lambda: False)
            try:
                self._decode_once(host, request, view, text, target, lambda pending=pending: cancelled() or pending(), found, 0.0, 1)
            except DecodeCancelled:
                if cancelled():
                    return []
            if view is None or not view.pending or cancelled():
                break
            self._wait(index, view.pending, given_up, cancelled)
        # the samples go without members not computed yet (none may follow them)
        if self.samples > 0 and not cancelled():
            view = ReadyOnlyIndex(index, unknown=given_up, answer_now=True) if index is not None else None
            try:
                self._decode_once(host, request, view, text, target, cancelled, found, 1.0, self.samples)
            except DecodeCancelled:
                return []
        ranked = sorted(found.values(), key=lambda p: -p.logprob)
        if ranked:  # far less probable than the best: not worth offering
            ranked = [p for p in ranked if p.logprob >= ranked[0].logprob - MAX_LOGPROB_GAP]
        self.last.update(candidates=len(ranked), decode_seconds=time.perf_counter() - started)
        return ranked

    def _decode_once(
        self, host, request, view, text: str, target: FixTarget, stop_now, found: dict[str, Proposal], temperature: float, count: int
    ) -> None:
        """One decode of `count` samples at `temperature` (0: greedy); the replacements
        are added to `found`."""
        from adaptrack_lsp.completion.decoders import DecodeRequest, decoder_for
        from adaptrack_lsp.constrainers.compose import AllOf
        from adaptrack_lsp.constrainers.environment import text_constraint
        from adaptrack_lsp.constrainers.token_index import TokenIndex

        settings = self.settings
        line_end = text.find("\n", target.decoded_end)
        line_rest = text[target.decoded_end : len(text) if line_end < 0 else line_end]
        with host.lock:
            host.require_ready()
            lm = host.model
            # the prompt: the document up to the expression; the suffix (FIM): the rest of its line
            plan = host.prompt_builder(settings, heal=True).build(
                text[: target.start] + line_rest, target.start, multiline=False, typed_word=request.typed_word
            )
            self.last.update(prompt_ids=list(plan.prompt_ids), fim=plan.fim)
            choices = None
            if target.shape == "argument":
                choices = self._keyword_names(view, request, plan, target)
                if not choices:
                    return
            parts = text_constraint(
                index=view,
                document=request.text,
                prefix=plan.constraint_prefix,
                roots=request.bound_names,
                local_modules=request.local_modules,
                assigned_attributes=request.assigned_attributes,
                forced_prefix=plan.heal_text,
                clean=True,
                keywords_index=view if settings.keyword_arguments and choices is None else None,
                keyword_choices=choices,
                syntax=settings.syntax_constraint and choices is None,
                suffix=request.text[target.start :],
                analysis=request.analysis,
            )
            constrainer = parts.constrainer
            if choices is None:
                shape = FixShape(target.shape, {target.head, *request.import_roots} if target.where == "chain" else None)
                constrainer = shape if constrainer is None else AllOf(constrainer, shape)
            constraint = TokenIndex(constrainer, lm.vocab, context=parts.context)
            constraint.off = parts.off
            heal = plan.heal_text
            model = lm
            if self.intent_weight > 0.0 and not getattr(lm, "partial", False):
                model = IntentPrior(lm, heal + target.copy, self.intent_weight)

            def end_of(generated: str) -> int | None:
                if choices is not None:  # a keyword name ends with its "="
                    position = generated.find("=", len(heal))
                    return None if position < 0 else position
                return chain_end(generated, len(heal))

            def stop(generated: str, checked: int = 0) -> bool:
                return len(generated) > len(heal) and end_of(generated) is not None

            self.last["decodes"] += 1
            result = decoder_for("adaptrack", settings).decode(
                model,
                constraint,
                DecodeRequest(
                    prompt_ids=plan.prompt_ids,
                    num_samples=count,
                    temperature=temperature,
                    max_new_tokens=max(MIN_NEW_TOKENS, settings.max_new_tokens),
                    timeout_s=max(MIN_DECODE_S, settings.timeout_ms / 1000.0),
                    seed=request.seed,
                    stop=stop,
                    cancelled=stop_now,
                    cache_key=f"fix:{request.document}",
                    batch_siblings=True,
                ),
            )
        for sample in result.samples:
            if not sample.complete or not sample.text.startswith(heal):
                continue
            replacement = self.replacement(text, target, sample.text[len(heal) : end_of(sample.text)])
            if replacement is None:
                continue
            known = found.get(replacement)
            if known is None:
                found[replacement] = Proposal(replacement, float(sample.logprob))
            elif sample.logprob > known.logprob:
                known.logprob = float(sample.logprob)

    @staticmethod
    def replacement(text: str, target: FixTarget, decoded: str) -> str | None:
        """The text that replaces `target` for a decoded name (None: not a replacement).

        A call keeps its arguments, with the object of a flagged method first when the
        new callee is not one of its members; a keyword keeps its value; an imported name
        without ``as`` stays bound to the old name."""
        decoded = decoded.strip()
        if not decoded or "\n" in decoded or "\r" in decoded:
            return None
        if target.shape == "argument":
            if not decoded.isidentifier():
                return None
            written = target.original.split("=", 1)[0].rstrip()
            replacement = decoded + target.original[len(written) :]
            return replacement if _KEYWORD_ARGUMENT.match(replacement) else None
        if target.shape == "call":
            arguments = target.kept
            if target.receiver and not decoded.startswith(target.receiver + "."):
                inner = arguments[1:-1]
                arguments = f"({target.receiver}{', ' + inner.strip() if inner.strip() else ''})"
            return decoded + arguments
        if target.rebind and decoded.isidentifier() and decoded != target.rebind:
            if not re.match(r"\s+as\b", text[target.end : target.end + 4]):
                return f"{decoded} as {target.rebind}"
        return decoded

    @staticmethod
    def _keyword_names(view, request, plan, target: FixTarget) -> list[str]:
        """The keyword names the call at `target` still takes (its signature's, less those
        given), the flagged one excepted; [] when the signature is not known."""
        from adaptrack_lsp.constrainers.api import ConstraintContext
        from adaptrack_lsp.constrainers.call_arguments import KeywordArguments

        if view is None:
            return []
        part = KeywordArguments(view, roots=request.bound_names)
        try:
            found = part.keywords_at(part.start(ConstraintContext(document=request.text, prefix=plan.constraint_prefix)))
        except Exception:  # a call the lexer cannot read: no names
            logger.debug("keyword names of the call failed", exc_info=True)
            return []
        return [name for name in (found[1] if found else ()) if name != target.copy]

    def _wait(self, index, paths, given_up: set, cancelled: Callable[[], bool]) -> None:
        """Wait for the index to answer `paths` (at most `index_wait_s` in all; those not
        answered by then are given up: unknown, unconstrained)."""
        waiting = [tuple(p) for p in paths if not index.ready(tuple(p))]
        if not waiting:
            return
        deadline = time.monotonic() + self.index_wait_s
        while waiting and time.monotonic() < deadline and not cancelled():
            index.wait_ready(waiting, 0.25)
            waiting = [p for p in waiting if not index.ready(p)]
        given_up.update(waiting)

    # -- checking ----------------------------------------------------------------------------
    def accept(
        self,
        text: str,
        target: FixTarget,
        proposals: Sequence[Proposal],
        *,
        local_modules: Iterable[str] = (),
        cancelled: Callable[[], bool] | None = None,
    ) -> list[str]:
        """The replacements among `proposals` (best first) that the check accepts: the
        edited document parses (where the original does), and its check finds nothing
        in the edited range and nothing the original did not have."""
        local = frozenset(local_modules)
        baseline = self._baseline_check(text, local)
        original_parses = _parses(text)
        before = [f for f in baseline.findings if f.end <= target.start or f.start >= target.end]
        accepted: list[str] = []
        seen: set[str] = {_squeeze(target.original)}
        for proposal in list(proposals)[:MAX_CHECKED]:
            if len(accepted) >= MAX_SUGGESTIONS or (cancelled is not None and cancelled()):
                break
            replacement = proposal.text
            if _squeeze(replacement) in seen:
                continue
            seen.add(_squeeze(replacement))
            edited = text[: target.start] + replacement + text[target.end :]
            if original_parses and not _parses(edited):
                continue
            shift = len(replacement) - (target.end - target.start)
            expected = {_key(f, target, shift) for f in before}
            result = self.checker.check(edited, local_modules=local, cancelled=cancelled)
            edited_end = target.start + len(replacement)
            if any(f.start < edited_end and f.end > target.start for f in result.findings):
                continue
            if any(_key(f, None, 0) not in expected for f in result.findings):
                continue
            if len(result.unparsed) > len(baseline.unparsed):
                continue
            accepted.append(replacement)
        return accepted

    def _baseline_check(self, text: str, local: frozenset):
        with self._lock:
            if self._baseline is not None and self._baseline[0] == (text, local):
                return self._baseline[1]
        result = self.checker.check(text, local_modules=local)
        with self._lock:
            self._baseline = ((text, local), result)
        return result


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _key(finding, target: FixTarget | None, shift: int) -> tuple:
    """A finding as compared across an edit: offsets after `target` move by `shift`."""
    start, end = finding.start, finding.end
    if target is not None and start >= target.end:
        start, end = start + shift, end + shift
    return (finding.kind, finding.name, start, end)


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def position(text: str, offset: int) -> dict[str, int]:
    """1-based line and column (characters) of character `offset` in `text`."""
    line_start = text.rfind("\n", 0, offset) + 1
    return {"line": text.count("\n", 0, offset) + 1, "column": offset - line_start + 1}


def edit(text: str, target: FixTarget, replacement: str) -> dict:
    """The suggestion record of one replacement: ``{"text", "start", "end"}``."""
    return {"text": replacement, "start": position(text, target.start), "end": position(text, target.end)}
