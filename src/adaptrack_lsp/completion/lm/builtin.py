"""The built-in offline model (``--model builtin``): a Kneser–Ney n-gram over BPE tokens of
permissively licensed Python, built on this machine at first use, plus a cache of the
document being edited.

Why this model: it has to write plausible Python without a download on a 2-core machine
with no GPU.  A small transformer trained on 2 CPU cores learns far too slowly (a 5.5M
parameter model reached a loss of 5.2 after 6 minutes); counting does not need
training.  These parts, mixed per token:

- the corpus model: interpolated modified Kneser–Ney of order 6 (`ngram.py`) over a
  16k byte-level BPE trained on the same corpus with the Qwen2 pre-tokenizer split (a
  ``.name`` after a dot is one token, so six tokens see about one line);
- the shards of the libraries the document imports (`shards.py`): the same kind of
  tables counted from each library's installed sources in the project's environment,
  mixed into the corpus model per token with weights (`SHARD_WEIGHTS`) that favour a
  library's shard after its own names (``pd.``, ``df.`` of a pandas type) and the
  base model elsewhere (`prepare_libraries`, `use_libraries`);
- the document model: the tokens that followed earlier occurrences of the longest
  suffix of the context in the prompt itself (code repeats its own names), weighted by
  the characters c of that suffix as c / (c + 6).  On held-out files it doubles
  next-token top-1 (see `benchmarks/builtin_model.py`);
- the members of the project context: a prompt that starts with snippets of other files
  (``# Path: file`` lines, `context.PLAIN_FILE_HEADER`) tells the document model which
  names each of those modules defines (top-level functions, classes, assignments and
  relative re-exports) and which methods and class attributes each of their classes
  has; after ``owner.`` where the owner is such a module (by its file name: ``utils.``
  for ``pkg/utils.py``, or the alias the header names) or class (or a name typed with
  the class: ``stock: Stock``, ``stock = Stock(``, or the request's typed receivers,
  `LibraryHints.classes`), the next token is also
  drawn, with weight `MEMBER_WEIGHT`, from the names' tokens (so names from ``utils.py``
  are proposed in ``main.py``).  The suffix matches stay within the current file (the
  last ``# Path:`` section): copying a snippet's signature (defaults included) into a
  call is worse than the corpus model's guess;
- a line prior (`BracketShapes`): a token that closes a bracket that is not open (or of
  another kind), ends the line while one is or continues it with a backslash, puts a
  colon where the statement needs none (or leaves a block header without one) or
  repeats a 4-gram of the same line keeps a small share of its probability; past 60
  characters, closing brackets and a balanced line end gain.

All give full distributions; every token has probability > 0, so every decoder and the
prefix tree work unchanged.  The model has no fill-in-the-middle tokens: prompts are
the text before the cursor (`context.PromptBuilder` plans them so).

The corpus (`corpus.py`): the standard library and numpy from the server's own
environment (never the user's project); licences and file counts go to
``manifest.json``.  Built at first use rather than shipped: a model from these sources is
about 100 MB of tables, more than a package should carry, and building takes one to two
minutes on 2 cores (a tqdm bar on stderr and the editor's progress).  It is cached under
the cache root in a folder named by a hash of the recipe and of the corpus packages'
versions, and loaded memory-mapped (well under a second).

Bad input: a damaged cached model is rebuilt with a message; when the cache root is not
writable the model is built in memory with one message (and again at the next start).
"""

from __future__ import annotations

import collections
import contextlib
import json
import keyword
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from adaptrack_lsp.completion.lm.base import LanguageModel, ModelError, PromptInfo
from adaptrack_lsp.completion.lm.corpus import (
    END_OF_TEXT,
    STDLIB,
    CorpusPackage,
    CorpusReport,
    corpus_files,
    corpus_token_stream,
    identity,
    read_corpus,
)
from adaptrack_lsp.completion.lm.ngram import NGramTables, build_tables
from adaptrack_lsp.completion.lm.shards import LibraryHints, LibraryShards, imported_modules, receiver_class
from adaptrack_lsp.config import cache_root

logger = logging.getLogger(__name__)

BUILTIN_NAME = "builtin"
#: the pre-tokenizer split: an identifier (with one leading space), a number, a run of
#: punctuation (with its line break), whitespace.  A token never joins punctuation to the
#: name after it, so text cut after ``np.`` or ``f(`` ends on a token boundary the corpus
#: has too (no token healing needed for the model to see familiar context)
PRE_TOKENIZER_PATTERN = r" ?[\p{L}_][\p{L}\p{N}_]*| ?\p{N}+| ?[^\s\p{L}\p{N}_]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

#: every input of the built-in model; changing a value changes the cache folder
BUILTIN_RECIPE = {
    "recipe": 1,
    "packages": [[STDLIB, ""], ["numpy", "numpy"]],
    "pre_tokenizer": PRE_TOKENIZER_PATTERN,
    "vocab_size": 16384,
    "order": 6,
    "prune_from": 3,
    "tokenizer_every": 3,  # every third file trains the tokenizer
    "max_file_bytes": 400_000,
    "max_corpus_bytes": None,
}
#: the document model's weight for a match of c characters is c / (c + DOCUMENT_WEIGHT):
#: a lone "." says little, "self.total =" a lot
DOCUMENT_WEIGHT = 6.0
#: longest suffix match looked for in the prompt (tokens), and how far back (tokens)
DOCUMENT_MAX_MATCH = 32
DOCUMENT_WINDOW = 4096
#: the member model's weight where it knows the owner before the cursor's ``.``
MEMBER_WEIGHT = 0.6
#: a member name sharing a run of c >= 3 characters with a name on the cursor's line
#: (``integral = _fitpack.`` and ``splint``) counts 1 + SHARED_RUN_WEIGHT * (c - 2) times
SHARED_RUN_WEIGHT = 4.0
#: each use of ``owner.member`` earlier in the current file multiplies its weight by this + 1
USED_WEIGHT = 2.0
#: the library shards' share of the corpus model, by where the next token is
#: (`BuiltinLanguageModel._library_position`): "own" in an attribute chain whose root
#: names a library with a shard (``pd.``, ``df.`` of a pandas type; all of it to that
#: shard), "standard" in a chain whose root names a standard-library module or an
#: instance of one of its types (``os.path.``, ``warnings.``), "module" in a chain whose
#: root names anything else the document imports or types (``np.`` where numpy has no
#: shard), "chain" in a chain of an unknown name (``self.``, a local), "line" elsewhere
#: on a line that names libraries with shards (to those), "other" everywhere else;
#: outside "own" and "line" the document's shards share the weight.  Fitted by EM on
#: held-out files
#: (`shards.fit_shard_weights`, ``benchmarks/builtin_model.py --fit matplotlib,sympy
#: --files 30 --tokens 1500``: the tests of two libraries not measured on, rounded, at
#: most 0.99; docs/builtin-model.md).  Per kind, by how the shards' longest matched
#: context compares with the base model's: a shard that has seen more of the context
#: than the base model knows more there.
SHARD_WEIGHTS = {
    "own": {"shorter": 0.73, "same": 0.94, "longer": 0.99},
    "standard": {"shorter": 0.04, "same": 0.0, "longer": 0.12},
    "module": {"shorter": 0.03, "same": 0.43, "longer": 0.15},
    "chain": {"shorter": 0.26, "same": 0.84, "longer": 0.99},
    "line": {"shorter": 0.38, "same": 0.62, "longer": 0.91},
    "other": {"shorter": 0.39, "same": 0.61, "longer": 0.96},
}
#: the document model's weight is multiplied by this where shards share the position
#: (same keys).  The fit of `SHARD_WEIGHTS` proposes 0.5 to 0.75 at ``chain`` and ``own
#: longer`` positions; with those, chain exact match at pandas' 120 benchmark cursors
#: stayed 0.275, so the document model keeps its weight everywhere (1.0)
DOCUMENT_SCALE = {kind: dict.fromkeys(("shorter", "same", "longer"), 1.0) for kind in SHARD_WEIGHTS}
#: an attribute chain ending at the next token (``pd.read_``, ``np.linalg.``): its root
_CHAIN_AT_END = re.compile(r"(?<![\w.])([^\W\d]\w*)(?:[ \t]*\.[ \t]*[^\W\d]\w*)*[ \t]*\.[ \t]*\w*\Z")
#: a name followed by a dot (a chain's root) anywhere on a line
_CHAIN_ROOT = re.compile(r"(?<![\w.])([^\W\d]\w*)[ \t]*\.")
#: a name bound to an instance of a class in the current file: ``stock: Stock``,
#: ``stock = Stock(`` (for the member model, where the document's own analysis has none)
_ANNOTATED = re.compile(r"(?<![\w.])([^\W\d]\w*)[ \t]*:[ \t]*[\"']?([A-Z]\w*)[\"']?[ \t]*[,)=\n]")
_CONSTRUCTED = re.compile(r"(?<![\w.])([^\W\d]\w*)[ \t]*=[ \t]*([A-Z]\w*)\(")
#: a line naming a file in the prompt's project context (`context.plain_header`): its
#: path and the aliases the current file imports it (or its names) by
_FILE_HEADER = re.compile(r"^# Path: (\S[^\n(]*?)(?: \(([^)\n]*)\))?[ \t]*$", re.M)
#: ``owner.partial`` at the end of the text before the next token (the owner may be the
#: last name of a dotted chain: ``pkg.utils.``)
_MEMBER_ACCESS = re.compile(r"(?<!\w)([^\W\d]\w*)\.(\w*)\Z")
_TOP_LEVEL_NAME = re.compile(r"(?:async[ \t]+)?def[ \t]+(\w+)|class[ \t]+(\w+)|(\w+)[ \t]*(?::[^=\n]*)?=(?!=)")
_ATTRIBUTE = re.compile(r"(?<![\w.])([^\W\d]\w*)\.([^\W\d]\w*)")
_REEXPORT = re.compile(r"from[ \t]+\.[\w.]*[ \t]+import[ \t]+\(?([^)#\n]*)")
#: the bracket prior: a token that closes a bracket that is not open, or ends the line
#: while one is, keeps this share of its probability
UNBALANCED_CLOSE = 1e-3
NEWLINE_WHILE_OPEN = 1e-3
#: a line break that leaves a block header (``if``, ``def``, ...) without its final colon,
#: or gives another statement one, keeps this share
WRONG_COLON = 1e-3
BLOCK_KEYWORDS = frozenset(
    ("if", "elif", "else", "while", "for", "with", "def", "class", "try", "except", "finally", "async", "match", "case")
)
#: a token that would repeat a 4-gram already written on the same line keeps this share
#: (n-gram models loop: ``dtype[np.dtype[np.dtype[``, ``1, 1, 1, 1``)
REPEAT = 0.05
#: past this many characters on a line, closing brackets and a balanced line end become
#: e times more likely every LONG_LINE_SCALE characters (code lines are rarely longer)
LONG_LINE = 60
LONG_LINE_SCALE = 4
REPEAT_CONTEXT = 3
MARKER = "adaptrack-recipe.json"
#: rough share of the build each stage takes (progress percentages)
_STAGES = {"read": 25, "tokenizer": 5, "encode": 35, "count": 33, "save": 2}


# -- the bracket prior -------------------------------------------------------------------
@dataclass(frozen=True)
class CodeState:
    """Where a Python text ends: its open brackets (innermost last), inside a string (its
    quote) or a comment."""

    brackets: str = ""
    quote: str = ""
    comment: bool = False

    @property
    def depth(self) -> int:
        return len(self.brackets)

    @property
    def in_code(self) -> bool:
        return not self.quote and not self.comment

    def closers(self, count: int) -> str:
        """The text that closes the innermost `count` open brackets."""
        return "".join(_CLOSING[b] for b in reversed(self.brackets[len(self.brackets) - count :]))


_CLOSING = {"(": ")", "[": "]", "{": "}"}


#: lines that are code whatever came before: a def, class or decorator, or a module-level
#: import (a prompt window may start inside a docstring; the scan starts afresh there)
_FRESH_LINE = re.compile(r"[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w|[ \t]*@\w|(?:import|from)[ \t]+\w")


def scan_code(text: str, state: CodeState = CodeState(), marks: Sequence[int] = ()) -> tuple[CodeState, list[bool]]:
    """`state` after `text`, and whether each offset in `marks` (ascending) is in code.

    Brackets are counted outside strings and comments; a closing bracket with none open
    is ignored, and at a line that is surely code (`_FRESH_LINE`) the scan starts afresh
    (a misread string state ends there too)."""
    brackets, quote, comment = state.brackets, state.quote, state.comment
    index, length = 0, len(text)
    flags: list[bool] = []
    mark = 0
    while index < length:
        if (index == 0 or text[index - 1] == "\n") and (quote or comment or brackets) and _FRESH_LINE.match(text, index):
            brackets, quote, comment = "", "", False
        while mark < len(marks) and marks[mark] <= index:
            flags.append(not quote and not comment)
            mark += 1
        char = text[index]
        if comment:
            if char == "\n":
                comment = False
        elif quote:
            if char == "\\":
                index += 1
            elif text.startswith(quote, index):
                index += len(quote) - 1
                quote = ""
            elif char == "\n" and len(quote) == 1:
                quote = ""  # an unterminated one-line string ends with its line
        elif char == "#":
            comment = True
        elif char in "'\"":
            quote = text[index : index + 3] if text[index : index + 3] in ("'''", '"""') else char
            index += len(quote) - 1
        elif char in "([{":
            brackets += char
        elif char in ")]}" and brackets:
            brackets = brackets[:-1]  # a mismatched closer closes the innermost bracket anyway
        index += 1
    flags.extend([not quote and not comment] * (len(marks) - mark))
    return CodeState(brackets, quote, comment), flags


_TRIPLE = re.compile(r"\"\"\"|\'\'\'")


def window_start_state(text: str) -> CodeState:
    """The state a prompt window starts in: inside a docstring when its first triple
    quote looks like a closing one (it starts a line, the line before it is not a
    ``def``/``class`` header ending in ``:``, and no such header comes before it), else
    in code.  A window is cut at a line start, often in the middle of a docstring;
    reading its closing quotes as an opening would turn the code after it into string."""
    match = _TRIPLE.search(text)
    if match is None or match.start() == 0:
        return CodeState()
    before = text[: match.start()]
    line_start = before.rfind("\n") + 1
    if before[line_start:].strip():
        return CodeState()  # x = """...: an opening
    previous = before[:line_start].rstrip()
    if not previous or previous.endswith(":") or re.search(r"^[ \t]*(?:async[ \t]+)?(?:def|class)\b", before, re.M):
        return CodeState()
    return CodeState(quote=match.group(0))


@dataclass
class BracketShapes:
    """Per token: the brackets it closes that it did not open (``"])"`` for ``"]),"``),
    the lowest bracket depth reached inside it (from 0) and the depth at its first line
    break; tokens with quotes, ``#`` or backslashes are left alone."""

    lowest: np.ndarray  # int32[V]
    at_newline: np.ndarray  # int32[V]; a large negative value when the token has no line break
    colon_before_newline: np.ndarray  # int8[V]: 1 the text before its line break ends with ":", 0 not, -1 blank
    has_newline: np.ndarray  # bool[V]
    closing: dict[str, np.ndarray]  # closers a token needs open -> the token ids
    continuation: np.ndarray  # bool[V]: a backslash outside a string (the line goes on)

    NO_NEWLINE = -(1 << 20)

    @classmethod
    def of(cls, texts: Sequence[str], size: int) -> BracketShapes:
        lowest = np.zeros(size, dtype=np.int32)
        at_newline = np.full(size, cls.NO_NEWLINE, dtype=np.int32)
        colon = np.zeros(size, dtype=np.int8)
        has_newline = np.zeros(size, dtype=bool)
        closing: dict[str, list[int]] = {}
        continuation = np.zeros(size, dtype=bool)
        for token_id, text in enumerate(texts):
            continuation[token_id] = "\\" in text and not any(c in text for c in "'\"#")
            if "\n" in text:
                has_newline[token_id] = True
                before = text.split("\n", 1)[0].rstrip()
                colon[token_id] = -1 if not before else int(before.endswith(":"))
            if not text or any(c in text for c in "'\"#\\"):
                continue
            depth = low = 0
            opened, unmatched = "", ""
            for char in text:
                if char in "([{":
                    depth += 1
                    opened += char
                elif char in ")]}":
                    depth -= 1
                    low = min(low, depth)
                    if opened:
                        opened = opened[:-1]
                    else:
                        unmatched += char
                elif char == "\n" and at_newline[token_id] == cls.NO_NEWLINE:
                    at_newline[token_id] = depth
            lowest[token_id] = low
            if unmatched:
                closing.setdefault(unmatched, []).append(token_id)
        groups = {key: np.asarray(ids, dtype=np.int64) for key, ids in closing.items()}
        return cls(lowest, at_newline, colon, has_newline, groups, continuation)

    def factors(self, state: CodeState, block_header: bool, ends_with_colon: bool, line_length: int) -> np.ndarray:
        """Multipliers for the next token after `state` (in code), on a line of
        `line_length` characters so far that is a block header (or not) and ends with a
        colon (or not)."""
        depth = state.depth
        factor = np.ones(len(self.lowest))
        closes = np.zeros(len(self.lowest), dtype=bool)
        for needed, ids in self.closing.items():
            if len(needed) <= depth and needed == state.closers(len(needed)):
                closes[ids] = True
            else:  # closes a bracket that is not open, or the wrong kind
                factor[ids] = UNBALANCED_CLOSE
        factor = np.where(depth + self.at_newline > 0, factor * NEWLINE_WHILE_OPEN, factor)
        factor = np.where(self.continuation, factor * NEWLINE_WHILE_OPEN, factor)  # a line completion ends its line
        colon = np.where(self.colon_before_newline < 0, int(ends_with_colon), self.colon_before_newline)
        wrong = self.has_newline & (depth + self.at_newline <= 0) & (colon != int(block_header))
        factor = np.where(wrong, factor * WRONG_COLON, factor)
        over = max(0, line_length - LONG_LINE) / LONG_LINE_SCALE
        if over > 0:  # past the usual line length, closing brackets and a balanced end gain
            ends = self.has_newline & (depth + self.at_newline <= 0)
            factor = np.where(closes | ends, factor * np.exp(min(over, 20.0)), factor)
        return factor


# -- the language model ------------------------------------------------------------------
class BuiltinLanguageModel(LanguageModel):
    """The n-gram corpus model mixed with the document model, over a byte-level BPE."""

    #: `contextTokens` when the setting is null: the context block costs no model time
    #: here (it is read once per change into the member table; the suffix matches and
    #: the scan stay in the current file), and more of the imported modules' names fit
    default_context_tokens = 2048

    def __init__(self, tokenizer, tables: NGramTables, recipe: dict, manifest: dict | None = None, name: str = BUILTIN_NAME):
        from adaptrack_lsp.completion.tokenizer_bytes import (
            ROUND_TRIP_TEXTS,
            round_trip_mismatches,
            vocabulary_from_tokenizer,
        )

        self.tokenizer = tokenizer
        self.tables = tables
        self.recipe = recipe
        self.manifest = manifest or {}
        self.name = name
        self.max_context = None
        self.tokens_fed = 0
        self.vocab = vocabulary_from_tokenizer(tokenizer)
        if self.vocab.size != tables.vocab_size:
            raise ModelError(f"the tokenizer has {self.vocab.size} tokens but the n-gram tables {tables.vocab_size}")
        mismatches = round_trip_mismatches(tokenizer, self.vocab, ROUND_TRIP_TEXTS)
        if mismatches:
            raise ModelError(f"the built-in tokenizer does not map to exact bytes: {mismatches[0]}")
        self.eos_id = int(tokenizer.token_to_id(END_OF_TEXT))
        self._start = [self.eos_id] * (tables.order - 1)  # a document start, as in the corpus
        self._prompt: list[int] = list(self._start)
        self._brackets = BracketShapes.of(self.vocab.texts, self.vocab.size)
        self._prompt_state = CodeState()
        self._document_weight = DOCUMENT_WEIGHT
        self._document_max_match = DOCUMENT_MAX_MATCH
        self._document_window = DOCUMENT_WINDOW
        self._member_weight = MEMBER_WEIGHT
        #: owner -> token sequences of its member names, from the prompt's context block
        self._members: dict[str, tuple[tuple[int, ...], ...]] = {}
        self._members_key: str | None = None
        self._member_weight_cache: dict[tuple, list[float]] = {}
        self._member_uses: collections.Counter = collections.Counter()
        self._name_cache: dict[str, tuple[int, ...]] = {}
        #: tokens that go on with a name (their text starts with a letter, digit or _)
        self._continues_name = np.array([bool(t) and (t[0].isalnum() or t[0] == "_") for t in self.vocab.texts])
        #: the prompt index where the current file starts (after the context block)
        self._current_start = 0
        #: the request's library shards and typed names (`use_libraries`)
        self._hints = LibraryHints()
        self._shard_weights = {kind: dict(by_relation) for kind, by_relation in SHARD_WEIGHTS.items()}
        self._document_scale = {kind: dict(by_relation) for kind, by_relation in DOCUMENT_SCALE.items()}
        #: name -> class for names the current file binds to a context class (`_ANNOTATED`)
        self._annotated: dict[str, str] = {}
        self._libraries: LibraryShards | None = None

    # -- library shards ------------------------------------------------------------------
    @property
    def libraries(self) -> LibraryShards:
        """The shards of this model (created at first use)."""
        if self._libraries is None:
            packages = self.manifest.get("corpus", {}).get("packages", [])
            base_corpus = {p["module"]: p["version"] for p in packages if p.get("module") != STDLIB}
            self._libraries = LibraryShards(recipe_key(self.recipe), self.tokenizer.to_str(), self.vocab.size, base_corpus)
        return self._libraries

    def prepare_libraries(
        self,
        *,
        imports: Mapping[str, tuple[str, ...]],
        receivers: Mapping[str, tuple[str, ...]] = {},
        context_texts: Sequence[str] = (),
        python_path: str | None = None,
        workspace_root: str | None = None,
        trusted: bool = False,
        build: str = "background",
        progress: Callable[[str], None] | None = None,
    ) -> LibraryHints:
        """The hints for a request (`use_libraries`): the shards of the top-level modules
        the document imports (`imports`: name -> module path), its typed receivers name
        (name -> typed path) and the context's files import, in the environment the API
        index reads; shards not built yet are built "now", in the "background" or
        "never" (`build`; `LibraryShards.hints`)."""
        owners = {name: path[0] for name, path in imports.items() if path}
        owners.update({name: path[0] for name, path in receivers.items() if path and name not in owners})
        modules = [*owners.values(), *(m for text in context_texts for m in imported_modules(text))]
        classes = {name: found for name, path in receivers.items() if (found := receiver_class(tuple(path)))}
        libraries = self.libraries
        environment = libraries.environment(python_path, workspace_root, trusted)
        return libraries.hints(modules, owners, classes, environment, workspace_root, build=build, progress=progress)

    def use_libraries(self, hints: LibraryHints | None) -> None:
        """Condition the following distributions on a request's library hints (None: none)."""
        self._hints = hints if hints is not None else LibraryHints()

    def _library_position(self, line: str) -> tuple[str, tuple[str, ...]]:
        """The kind of position the next token is at (see `SHARD_WEIGHTS`) and the
        libraries whose shards share the weight there."""
        hints = self._hints
        match = _CHAIN_AT_END.search(line)
        if match is not None:
            module = hints.owners.get(match.group(1))
            if module is not None:
                return "own", (module,)
            root = match.group(1)
            kind = "standard" if root in hints.standard else "module" if root in hints.others else "chain"
            return kind, tuple(hints.shards)
        named = tuple(dict.fromkeys(hints.owners[n] for n in _CHAIN_ROOT.findall(line) if n in hints.owners))
        return ("line", named) if named else ("other", tuple(hints.shards))

    def _library_parts(self, context: list[int], line: str) -> tuple[tuple[str, str] | None, np.ndarray, np.ndarray | None]:
        """The base model's next-token distribution and, where shards share the position,
        its kind and relation (`SHARD_WEIGHTS`) and the mean of their distributions."""
        base, base_match = self.tables.distribution_and_match(context[-(self.tables.order - 1) :])
        if not self._hints.shards:
            return None, base, None
        kind, modules = self._library_position(line)
        if not modules:
            return None, base, None
        mixed, longest = None, 0
        for module in modules:
            shard = self._hints.shards[module]
            probs, matched = shard.distribution_and_match(context[-(shard.order - 1) :])
            mixed = probs if mixed is None else mixed + probs
            longest = max(longest, matched)
        relation = "longer" if longest > base_match else "same" if longest == base_match else "shorter"
        return (kind, relation), base, mixed / len(modules)

    def _corpus_distribution(self, context: list[int], line: str) -> tuple[np.ndarray, float]:
        """The base model's next-token distribution mixed with the request's shards, and
        the scale of the document model's weight there (`DOCUMENT_SCALE`)."""
        where, base, shards = self._library_parts(context, line)
        if where is None:
            return base, 1.0
        weight = self._shard_weights[where[0]][where[1]]
        return (1.0 - weight) * base + weight * shards, self._document_scale[where[0]][where[1]]

    def set_prompt(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 0, cache_key: Hashable | None = None
    ) -> PromptInfo:
        ids = [int(i) for i in prompt_ids]
        self._check_ids(ids, "prompt")
        self._prompt = ids if ids else list(self._start)
        # per prompt token: whether it starts in code (not in a string or comment), for
        # the document model; the state at the end, for the bracket prior
        first = max(0, len(self._prompt) - self._document_window)
        texts = [self.vocab.texts[t] for t in self._prompt[first:]]
        starts = np.concatenate(([0], np.cumsum([len(t) for t in texts])))
        window = "".join(texts)
        # a context block (snippets of other files) is read for its members only; the
        # scan and the suffix matches start where the current file does
        section = self._read_context_members(window, starts)
        current = window[starts[section] :]
        marks = (starts[section:] - starts[section]).tolist()
        state, flags = scan_code(current, window_start_state(current), marks=marks)
        in_code = np.ones(len(self._prompt) + 1, dtype=bool)
        in_code[first : first + section] = False
        in_code[first + section :] = flags
        self._prompt_in_code, self._prompt_state = in_code, state
        self._current_start = first + section
        self._member_uses = collections.Counter(_ATTRIBUTE.findall(current)) if self._members else collections.Counter()
        self._annotated = (
            {name: cls for pattern in (_ANNOTATED, _CONSTRUCTED) for name, cls in pattern.findall(current) if cls in self._members}
            if self._members
            else {}
        )
        self._member_weight_cache = {}
        token_bytes, prompt = self.vocab.token_bytes, self._prompt
        self._prompt_line_start = next((i + 1 for i in range(len(prompt) - 1, -1, -1) if b"\n" in token_bytes[prompt[i]]), 0)
        self.tokens_fed += len(ids)
        return PromptInfo(length=len(ids))

    def next_logprobs(self, path: Sequence[int]) -> np.ndarray:
        path = [int(t) for t in path]
        self._check_ids(path, "path")
        probs = self._probabilities(path)
        self.tokens_fed += 1
        with np.errstate(divide="ignore"):
            return np.log(probs / probs.sum()).astype(np.float32)

    def _probabilities(self, path: list[int]) -> np.ndarray:
        """The unnormalised next-token distribution after prompt + `path`."""
        context = self._prompt + path
        line = self._line_text(path)
        probs, document_scale = self._corpus_distribution(context, line)
        state = scan_code("".join(self.vocab.texts[t] for t in path), self._prompt_state)[0] if path else self._prompt_state
        document, match = self._document_distribution(context, state.in_code)
        if document is not None:
            matched = int(self.vocab.byte_lengths[context[len(context) - match :]].sum())
            weight = min(document_scale * matched / (matched + self._document_weight), 0.99)
            probs = (1.0 - weight) * probs + weight * document
        if state.in_code and self._members:
            found = self._member_distribution(context)
            if found is not None:
                members, ended = found
                probs = probs / probs.sum()
                if ended > 0.0:  # a member name is complete here: what may follow a name
                    after = np.where(self._continues_name, 0.0, probs)
                    members = members + ended * after / max(after.sum(), 1e-300)
                probs = (1.0 - self._member_weight) * probs + self._member_weight * members
        if state.in_code:
            words = line.split(None, 1)
            header = bool(words) and words[0].rstrip(":") in BLOCK_KEYWORDS
            probs = probs * self._brackets.factors(state, header, line.rstrip().endswith(":"), len(line))
        repeated = self._repeating(context, path)
        if len(repeated):
            probs[repeated] *= REPEAT
        return probs

    # -- the project context's members -------------------------------------------------
    def _read_context_members(self, window: str, starts: np.ndarray) -> int:
        """Learn the members the prompt's context block defines (kept while the block is
        the same: the block is the prompt's stable start); returns the index, in the
        window's tokens, where the current file starts (0 without a block)."""
        headers = list(_FILE_HEADER.finditer(window))
        if len(headers) < 2:
            self._members, self._members_key = {}, None
            return 0
        block = window[headers[0].start() : headers[-1].start()]
        if block != self._members_key:
            sections = [
                (headers[i].group(1).strip(), headers[i].group(2) or "", window[headers[i].end() : headers[i + 1].start()])
                for i in range(len(headers) - 1)
            ]
            names = context_member_names(sections)
            self._members = {owner: tuple(self._name_ids(name) for name in found) for owner, found in names.items()}
            self._members_key = block
        return int(np.searchsorted(starts, headers[-1].end() + 1, side="left"))

    def _name_ids(self, name: str) -> tuple[int, ...]:
        ids = self._name_cache.get(name)
        if ids is None:
            if len(self._name_cache) > 65536:
                self._name_cache.clear()
            ids = self._name_cache[name] = tuple(self.encode(name))
        return ids

    def _member_distribution(self, context: list[int]) -> tuple[np.ndarray, float] | None:
        """After ``owner.`` (and the start of a name), the next tokens of the owner's member
        names (weighted by `_member_weights`), and the share of the names that end right
        here (the caller gives it to the tokens that do not continue a name); None when
        the owner is not known or no member name starts with what follows the dot."""
        tail_ids = context[-24:]
        tail = self.vocab.decode(tail_ids)
        match = _MEMBER_ACCESS.search(tail)
        if match is None:
            return None
        owner = match.group(1)
        if owner not in self._members:  # a typed name: the members of its class
            owner = self._hints.classes.get(owner) or self._annotated.get(owner) or owner
        sequences = self._members.get(owner)
        if not sequences:
            return None
        typed, partial = [], match.group(2)
        length = 0
        for token in reversed(tail_ids):  # the tokens of the name typed after the dot
            if length >= len(partial):
                break
            typed.insert(0, token)
            length += len(self.vocab.texts[token])
        if length != len(partial) or "".join(self.vocab.texts[t] for t in typed) != partial:
            return None
        depth = len(typed)
        line = tail[tail.rfind("\n") + 1 : match.start()]
        weights = self._member_weights(owner, line, match.group(1))
        following, counts, ended = [], [], 0.0
        for sequence, weight in zip(sequences, weights):
            if len(sequence) >= depth and list(sequence[:depth]) == typed:
                if len(sequence) > depth:
                    following.append(sequence[depth])
                    counts.append(weight)
                else:
                    ended += weight
        total = sum(counts) + ended
        if total <= 0.0:
            return None
        mass = np.bincount(np.asarray(following, dtype=np.int64), weights=counts, minlength=self.vocab.size)
        return mass / total, ended / total

    def _member_weights(self, owner: str, line: str, written: str | None = None) -> list[float]:
        """Each member of `owner` weighted by the longest run of characters it shares with
        a name on the cursor's line (lower case): ``chi2 = _stats.`` favours
        ``_SimpleChi2`` (1 when none shares 3 or more), times 1 + `USED_WEIGHT` per use
        (up to 4) of ``written.member`` earlier in the current file (`written`: the name
        the file writes before the dot, `owner` unless it is a typed name of that class)."""
        written = written or owner
        words = tuple(sorted({w.lower() for w in re.findall(r"[^\W\d]\w*", line) if w not in (owner, written) and not keyword.iskeyword(w)}))
        key = (owner, written, words)
        cached = self._member_weight_cache.get(key)
        if cached is None:
            cached = []
            for sequence in self._members[owner]:
                name = self.vocab.decode(list(sequence)).lower()
                run = max((_longest_common_run(name, word) for word in words), default=0)
                used = min(4, self._member_uses.get((written, self.vocab.decode(list(sequence))), 0))
                cached.append((1.0 + SHARED_RUN_WEIGHT * (run - 2) if run >= 3 else 1.0) * (1.0 + USED_WEIGHT * used))
            if len(self._member_weight_cache) > 256:
                self._member_weight_cache.clear()
            self._member_weight_cache[key] = cached
        return cached

    def _line_text(self, path: list[int]) -> str:
        """The text of the current line (prompt and path) up to the next token."""
        text = self.vocab.decode(self._prompt[self._prompt_line_start :] + path)
        return text[text.rfind("\n") + 1 :]

    def _repeating(self, context: list[int], path: list[int]) -> np.ndarray:
        """Tokens that would repeat a 4-gram written before on the current line."""
        line_start = self._prompt_line_start
        for offset in range(len(path) - 1, -1, -1):
            if b"\n" in self.vocab.token_bytes[path[offset]]:
                line_start = len(self._prompt) + offset + 1
                break
        line = np.asarray(context[line_start:], dtype=np.int64)
        size = REPEAT_CONTEXT
        if len(line) <= size:
            return line[:0]
        tail = line[-size:]
        starts = np.ones(len(line) - size, dtype=bool)
        for k in range(size):
            starts &= line[k : len(line) - size + k] == tail[k]
        return np.unique(line[size:][starts])

    def distribution_parts(self, path: Sequence[int]) -> tuple[np.ndarray, np.ndarray | None, int]:
        """(corpus model, document model or None, match length) for `path` (diagnostics)."""
        path = [int(t) for t in path]
        context = self._prompt + path
        state = scan_code("".join(self.vocab.texts[t] for t in path), self._prompt_state)[0]
        document, match = self._document_distribution(context, state.in_code)
        return self.tables.distribution(context[-(self.tables.order - 1) :]), document, match

    def library_parts(self, path: Sequence[int], token: int) -> tuple[str, float, float | None, float, float]:
        """What `SHARD_WEIGHTS` is fitted on, at prompt + `path` for the next `token`: the
        kind of position and relation (``"own longer"``), P(token) under the base model,
        under the shards sharing the position (their mean; None without any), under the
        document model, and the document model's weight (0 without a match)."""
        path = [int(t) for t in path]
        context = self._prompt + path
        where, base, shards = self._library_parts(context, self._line_text(path))
        kind = " ".join(where) if where is not None else ""
        shard = float(shards[token]) if shards is not None else None
        state = scan_code("".join(self.vocab.texts[t] for t in path), self._prompt_state)[0] if path else self._prompt_state
        document, match = self._document_distribution(context, state.in_code)
        if document is None:
            return kind, float(base[token]), shard, 0.0, 0.0
        matched = int(self.vocab.byte_lengths[context[len(context) - match :]].sum())
        weight = matched / (matched + self._document_weight)
        return kind, float(base[token]), shard, float(document[token]), weight

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def _check_ids(self, ids: Sequence[int], what: str) -> None:
        for token_id in ids:
            if not 0 <= token_id < self.vocab.size:
                raise ValueError(f"{what} token id {token_id} is outside the vocabulary's {self.vocab.size} ids")

    def _document_distribution(self, context: list[int], in_code: bool) -> tuple[np.ndarray | None, int]:
        """The tokens that followed earlier occurrences, in the prompt, of the longest suffix
        of `context` found there (within the last `document_window` tokens of the current
        file, after any context block); (None, 0) when there is none.  Only continuations inside the prompt count (generated text
        never reinforces itself: a cache of its own output loops, ``.fft.fft.fft``), and
        only those on the same side of code / comments and strings as the cursor (code
        is not completed with the prose of a comment)."""
        window = context[max(len(context) - self._document_window, self._current_start) :]
        tokens = np.asarray(window, dtype=np.int64)
        length = len(tokens)
        window_start = len(context) - length
        prompt_end = len(self._prompt) - window_start  # continuations must lie before it
        if length < 2 or prompt_end < 2:
            return None, 0
        ends = np.zeros(length - 1, dtype=bool)  # ends[p]: a match ends at p, its continuation is tokens[p + 1]
        allowed = self._prompt_in_code[window_start + 1 : window_start + prompt_end] == in_code
        ends[: prompt_end - 1] = (tokens[: prompt_end - 1] == tokens[-1]) & allowed
        if not ends.any():
            return None, 0
        match = 1
        while match < min(self._document_max_match, length - 1):
            longer = np.zeros_like(ends)
            longer[match:] = ends[match:] & (tokens[: length - 1 - match] == tokens[-1 - match])
            if not longer.any():
                break
            ends, match = longer, match + 1
        following = tokens[1:][ends]
        counts = np.bincount(following, minlength=self.vocab.size).astype(np.float64)
        return counts / counts.sum(), match


def _longest_common_run(a: str, b: str) -> int:
    """The length of the longest substring `a` and `b` share."""
    best = 0
    for start in range(len(a)):
        for end in range(start + best + 1, len(a) + 1):
            if a[start:end] in b:
                best = end - start
            else:
                break
    return best


def context_member_names(sections: Sequence[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Owner -> member names defined in snippets of other files ((file label, alias note,
    text)): a module (named by its file's stem, or its folder for ``__init__.py``) owns
    its top-level functions, classes, assigned names and relative re-exports
    (``from ._basic import fft``); a class owns its methods and class attributes (the
    first indentation level of its body).  The alias note (``config as cfg, Report as
    R``) gives the same members to the names the current file imports them by.  Dunder
    names (``__init__``, ``__all__``) are left out: code rarely writes them after a dot."""
    owners: dict[str, list[str]] = {}

    def add(owner: str, name: str) -> None:
        if keyword.iskeyword(name) or (name.startswith("__") and name.endswith("__")):
            return
        names = owners.setdefault(owner, [])
        if name not in names:
            names.append(name)

    aliases: list[tuple[str, str]] = []
    for path, note, text in sections:
        parts = path.replace("\\", "/").split("/")
        stem = parts[-1].rsplit(".", 1)[0]
        module = parts[-2] if stem == "__init__" and len(parts) > 1 else stem
        for entry in note.split(","):
            pair = entry.split(" as ")
            if len(pair) == 2 and pair[0].strip() and pair[1].strip():
                aliases.append((pair[0].strip(), pair[1].strip()))
        owner_class, member_indent = None, None
        for line in text.split("\n"):
            body = line.lstrip(" \t")
            if not body or body.startswith("#"):
                continue
            indent = len(line) - len(body)
            if indent == 0:
                owner_class, member_indent = None, None
                reexport = _REEXPORT.match(body)
                if reexport:
                    for item in reexport.group(1).split(","):
                        words = item.split()
                        if words and words[-1].isidentifier():
                            add(module, words[-1])
                    continue
                found = _TOP_LEVEL_NAME.match(body)
                if found:
                    name = next(group for group in found.groups() if group)
                    add(module, name)
                    if found.group(2):
                        owner_class = name
                continue
            if owner_class is None:
                continue
            if member_indent is None:
                member_indent = indent
            if indent == member_indent:
                found = _TOP_LEVEL_NAME.match(body)
                if found:
                    add(owner_class, next(group for group in found.groups() if group))
    for name, alias in aliases:
        for member in owners.get(name, ()):
            add(alias, member)
    return owners


# -- building ----------------------------------------------------------------------------
@dataclass
class BuiltModel:
    """What a build produces, before it is saved (or used in memory)."""

    tokenizer_json: str
    tables: NGramTables
    manifest: dict

    def save(self, folder: Path, recipe: dict) -> None:
        (folder / "tokenizer.json").write_text(self.tokenizer_json, encoding="utf-8")
        names = self.tables.save(folder)
        (folder / "manifest.json").write_text(json.dumps(self.manifest, indent=1, sort_keys=True) + "\n")
        sizes = {name: (folder / name).stat().st_size for name in ["tokenizer.json", "manifest.json", *names]}
        (folder / MARKER).write_text(json.dumps({"recipe": recipe, "files": sizes}, indent=1, sort_keys=True) + "\n")

    def model(self, recipe: dict) -> BuiltinLanguageModel:
        from tokenizers import Tokenizer

        return BuiltinLanguageModel(Tokenizer.from_str(self.tokenizer_json), self.tables, recipe, self.manifest)


def _new_tokenizer(pattern: str):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


class _Progress:
    """One progress bar over the build's stages (tqdm on stderr, and the caller's callback)."""

    def __init__(self, callback: Callable[[str, int | None], None] | None, show_bar: bool):
        self.callback = callback
        self.done = 0.0
        self.bar = None
        if show_bar:
            from tqdm import tqdm

            self.bar = tqdm(
                total=100,
                desc="building the built-in model (first use)",
                file=sys.stderr,
                mininterval=0.5 if sys.stderr.isatty() else 15,
                bar_format="{desc}: {percentage:3.0f}%|{bar:20}| {elapsed}{postfix}",
            )
        self._reported = -1

    def stage(self, name: str, fraction: float, label: str) -> None:
        """`fraction` (0..1) of stage `name` (`_STAGES`) is done."""
        start = 0.0
        for stage, weight in _STAGES.items():
            if stage == name:
                break
            start += weight
        done = start + _STAGES[name] * max(0.0, min(1.0, fraction))
        if done <= self.done:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(label, refresh=False)
            self.bar.update(done - self.done)
        self.done = done
        if self.callback is not None and int(done) != self._reported:
            self._reported = int(done)
            self.callback(f"building the built-in model (first use): {label}", int(done))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def build_model(
    recipe: dict | None = None,
    progress: Callable[[str, int | None], None] | None = None,
    show_bar: bool = True,
) -> BuiltModel:
    """Read the corpus, train the tokenizer, count the n-grams (minutes; see `BUILTIN_RECIPE`)."""
    from tokenizers import pre_tokenizers, trainers

    recipe = BUILTIN_RECIPE if recipe is None else recipe
    started = time.perf_counter()
    bar = _Progress(progress, show_bar)
    try:
        packages = [CorpusPackage(module, distribution) for module, distribution in recipe["packages"]]
        report = CorpusReport()
        files = corpus_files(packages, report)
        for module, reason in report.skipped.items():
            logger.warning("built-in model: corpus package %s skipped: %s", module, reason)
        texts: list[str] = []
        for index, text in enumerate(read_corpus(files, recipe["max_file_bytes"], recipe.get("max_corpus_bytes")), 1):
            texts.append(text)
            if index % 32 == 0:
                bar.stage("read", index / max(1, len(files)), "reading the corpus")
        if not texts:
            raise ModelError(
                "the built-in model has no corpus: "
                + (", ".join(f"{m} ({r})" for m, r in report.skipped.items()) or "no usable Python files")
            )
        bar.stage("read", 1.0, "training the tokenizer")

        tokenizer = _new_tokenizer(recipe["pre_tokenizer"])
        trainer = trainers.BpeTrainer(
            vocab_size=recipe["vocab_size"],
            min_frequency=2,
            special_tokens=[END_OF_TEXT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts[:: recipe["tokenizer_every"]], trainer=trainer)
        vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        bar.stage("tokenizer", 1.0, "tokenizing the corpus")

        order = recipe["order"]
        tokens, flags = corpus_token_stream(
            tokenizer, texts, order, lambda done: bar.stage("encode", done, "tokenizing the corpus")
        )
        del texts
        corpus_tokens = int(flags.sum())

        tables = build_tables(
            tokens,
            flags,
            order,
            vocab_size,
            prune_from=recipe["prune_from"],
            progress=lambda k: bar.stage("count", k / order, f"counted {k}-grams"),
        )
        del tokens, flags
        manifest = {
            "model": BUILTIN_NAME,
            "python": sys.version.split()[0],
            "corpus": report.as_dict(),
            "corpus_tokens": corpus_tokens,
            "vocab_size": vocab_size,
            "order": order,
            "table_entries": tables.entries,
            "table_bytes": tables.nbytes,
            "build_seconds": round(time.perf_counter() - started, 1),
        }
        built = BuiltModel(tokenizer.to_str(), tables, manifest)
        bar.stage("save", 1.0, "done")
        return built
    finally:
        bar.close()


# -- the cache ---------------------------------------------------------------------------
def recipe_key(recipe: dict | None = None) -> str:
    """The cache folder name: a hash of the recipe, Python, tokenizers and the corpus versions."""
    from adaptrack_lsp.cache import recipe_key

    recipe = BUILTIN_RECIPE if recipe is None else recipe
    packages = [CorpusPackage(module, distribution) for module, distribution in recipe["packages"]]
    return recipe_key("builtin", {**recipe, "corpus_versions": identity(packages), "numpy": np.__version__.split(".")[0]}, with_torch=False)


class DamagedModel(ValueError):
    """A cached model folder whose files are missing or inconsistent."""


def load_folder(folder: Path) -> BuiltinLanguageModel:
    """The model saved in `folder`; raises `DamagedModel` when its files do not check out."""
    from tokenizers import Tokenizer

    try:
        marker = json.loads((folder / MARKER).read_text())
        for name, size in marker["files"].items():
            actual = (folder / name).stat().st_size
            if actual != size:
                raise DamagedModel(f"{name} has {actual} bytes, {size} expected")
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tables = NGramTables.load(folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        return BuiltinLanguageModel(tokenizer, tables, marker["recipe"], manifest)
    except DamagedModel:
        raise
    except Exception as error:  # any unreadable or inconsistent file
        raise DamagedModel(f"{type(error).__name__}: {error}") from error


def _writable(root: Path) -> str | None:
    """None when files can be created under `root`, else why not."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def load_builtin_model(
    progress: Callable[[str, int | None], None] | None = None,
    recipe: dict | None = None,
    show_bar: bool = True,
) -> BuiltinLanguageModel:
    """The built-in model from the cache root, built there first when absent or damaged.

    An unwritable cache root: built in memory (one warning; rebuilt at every start).
    `recipe`: `BUILTIN_RECIPE` unless given.
    """
    from adaptrack_lsp.cache import file_lock

    recipe = BUILTIN_RECIPE if recipe is None else recipe
    root = cache_root()
    name = recipe_key(recipe)
    folder = root / name
    if (folder / MARKER).is_file():
        try:
            return load_folder(folder)
        except DamagedModel as error:
            logger.warning("the cached built-in model in %s is damaged (%s); rebuilding it", folder, error)
    problem = _writable(root)
    if problem is not None:
        logger.warning(
            "the cache root %s is not writable (%s): building the built-in model in memory (it is rebuilt at every "
            "start; set ADAPTRACK_CACHE to a writable folder to keep it)",
            root,
            problem,
        )
        return build_model(recipe, progress, show_bar).model(recipe)
    with file_lock(root / f".{name}.lock"):
        if (folder / MARKER).is_file():
            with contextlib.suppress(DamagedModel):
                return load_folder(folder)  # built by another process meanwhile
        built = build_model(recipe, progress, show_bar)
        temporary = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
        try:
            built.save(temporary, recipe)
            if folder.exists():  # a damaged or half-written folder
                shutil.rmtree(folder)
            os.chmod(temporary, 0o755)
            os.rename(temporary, folder)
        finally:
            if temporary.exists():
                shutil.rmtree(temporary, ignore_errors=True)
    return load_folder(folder)


def builtin_model_path(recipe: dict | None = None) -> Path:
    """Where the built-in model of `recipe` (`BUILTIN_RECIPE` unless given) is (or will be) cached."""
    return cache_root() / recipe_key(recipe)
