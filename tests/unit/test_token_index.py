"""TokenIndex: masks equal brute-force checking of every token, for the API monitor, the
whitelist, forced prefixes and their AND, on a hand-made vocabulary with every tricky
token shape, the tiny model's tokenizer and a >= 100k-token tokenizer."""

from __future__ import annotations

import random

import numpy as np
import pytest

from adaptrack_lsp.apis.snapshot import module_snapshot
from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer
from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
from adaptrack_lsp.constrainers.base import TokenConstraint
from adaptrack_lsp.constrainers.compose import AllOf, ForcedPrefix
from adaptrack_lsp.constrainers.token_index import END, TokenIndex, TokenTables
from adaptrack_lsp.constrainers.whitelist import Whitelist
from adaptrack_lsp.vocab import Vocabulary

NAMES = [
    "numpy.linalg.norm",
    "numpy.linalg.matrix_rank",
    "numpy.linalg.linalg",
    "numpy.prod",
    "numpy.product_x",
    "numpy.array",
    "numpy.random.rand",
    "numpy.random.randint",
    "numpy.nan",
    "numpy.e",
    "torch.linalg.matrix_rank",
    "torch.nn.Linear",
    "os.path.join",
]
DOCUMENT = "import numpy as np\nfrom torch import linalg, nn\nimport os.path\n"

# every shape the mask machinery distinguishes: pure identifier runs, identifier + rest,
# rests starting with "." (after spaces), dots inside tokens, alias words after
# punctuation, strings, comments, numbers, partial UTF-8, spaces after dots
PIECES = [
    "np",
    "n",
    "p",
    ".",
    "np.",
    " np.",
    "(np.",
    "np.array",
    "array",
    "arr",
    "ay",
    "lin",
    "alg",
    "linalg",
    "alg.",
    "alg.norm(",
    ".norm",
    ".n",
    "..",
    ". ",
    " .",
    " .linalg",
    "prod",
    "pro",
    "d",
    "uct",
    "_x",
    "(",
    ")",
    " ",
    "\n",
    "'",
    '"',
    '"""',
    "#",
    "x",
    "x.",
    ".T",
    "1",
    "1.",
    "e",
    "nan",
    "random",
    ".random.",
    "rand",
    "int",
    ".rand(",
    "torch",
    "nn",
    ".nn",
    "Linear",
    "ar(",
    "rank",
    "matrix",
    "_rank",
    "np.random",
    " x",
    "f'",
    "{",
    "}",
    "\\",
    "os",
    ".path",
    "path.",
    "join",
    "linalg.matrix_rank",
    "y = np.",
    "=np.prod",
    "\tnp",
    "é",
    "_",
    "mat",
    "rix",
    "xnp.",
    "np .",
    ".e)",
    "norm",
    "norm.",
    "'np.",
    "# np.",
    "1.np.",
    " . ",
    "npx",
]


def tricky_vocabulary() -> Vocabulary:
    pieces = list(dict.fromkeys(PIECES))
    data = [p.encode() for p in pieces] + [b"\xc3", b"\xa9", b"", b"", b"<special>"]
    eos = len(pieces) + 2
    return Vocabulary(
        data, eos_ids=[eos], size=len(data) + 3, special_ids=[len(data) - 1]
    )


def monitor_index(vocab: Vocabulary, prefix: str = DOCUMENT) -> TokenIndex:
    monitor = ApiMonitor(StaticIndex(NAMES))
    return TokenIndex(monitor, vocab, context=ConstraintContext(DOCUMENT, prefix))


def reachable_states(
    index: TokenIndex, rng: random.Random, walks: int, steps: int, targets=()
) -> set:
    """States from random valid walks and from the token-by-token advance along texts."""
    start = index.initial_state()
    states = {start}
    vocab = index.vocab
    for _ in range(walks):
        state = start
        for _ in range(rng.randint(0, steps)):
            valid = np.flatnonzero(index.mask(state)[: vocab.num_defined])
            valid = [int(t) for t in valid if t not in vocab.eos_ids]
            if not valid:
                break
            state = index.advance(state, rng.choice(valid))
            states.add(state)
    for ids in targets:
        state = start
        for token_id in ids:
            state = index.advance(state, token_id)
            if state is None:
                break
            states.add(state)
    return states


def assert_masks_match(index: TokenIndex, states) -> None:
    for state in states:
        fast = index.compute_mask(state)
        slow = index.brute_force_mask(state)
        if not np.array_equal(fast, slow):
            diff = np.flatnonzero(fast != slow)[:10]
            detail = [
                (index.vocab.text(int(i)), bool(fast[i]), bool(slow[i])) for i in diff
            ]
            raise AssertionError(
                f"mask differs from brute force in state {state!r}: {detail}"
            )


def test_tricky_vocabulary_masks_equal_brute_force():
    vocab = tricky_vocabulary()
    index = monitor_index(vocab)
    states = reachable_states(index, random.Random(0), walks=1500, steps=8)
    # the walks reach chains, strings, comments and numbers
    kinds = {ApiMonitor.describe(s).split()[0] for s in states}
    assert {"member", "after", "code", "string", "comment", "number"} <= kinds
    assert len(states) > 500
    assert_masks_match(index, states)


#: instances: `client` keeps a __dict__ (a new attribute may be assigned at the start of a
#: statement), `plain` does not; `client.session` keeps one as well
INSTANCE_NAMES = [
    "pkg.Client.().__dict__",
    "pkg.Client.().get",
    "pkg.Client.().session.__dict__",
    "pkg.Client.().session.close",
    "pkg.Plain.().get",
]
INSTANCE_PIECES = [
    "client", "plain", "cli", "ent", "client.", "client.tag", ".", ".get", "get", "ge", ".session", "session",
    "ssion.tag", ".se", ".tag", ".tag =", "tag", "t", "ag", " =", "=", "==", "= ", " ", "\n", "(", ")", "x",
    "1", "+=", ":", "__dict__", "_", " .", "get(", ".close", "close", "# ", "'",
]


def test_new_attribute_masks_equal_brute_force():
    """At the start of a statement a name an instance lacks may be assigned (``client.tag =
    1``) when its class keeps an instance ``__dict__``, and only assigned: masks of those
    states (statement starts, chains, the pending name) equal checking every token."""
    pieces = list(dict.fromkeys(INSTANCE_PIECES))
    data = [p.encode() for p in pieces]
    vocab = Vocabulary(data, eos_ids=[len(data)], size=len(data) + 1)
    roots = {"client": ("pkg", "Client", "()"), "plain": ("pkg", "Plain", "()")}
    index = TokenIndex(ApiMonitor(StaticIndex(INSTANCE_NAMES), roots=roots), vocab, context=ConstraintContext("x = 1\n", "x = 1\n"))
    encode = lambda text: [pieces.index(piece) for piece in text]
    targets = [
        encode(["client", ".tag", " =", " ", "1"]),
        encode(["client", ".session", ".tag", "=", "1"]),
        encode(["plain", ".get", "("]),
        encode(["client.tag", " ", "=="]),
    ]
    states = reachable_states(index, random.Random(1), walks=800, steps=6, targets=targets)
    kinds = {ApiMonitor.describe(s).split()[0] for s in states}
    assert {"new", "member", "after", "statement"} <= kinds
    assert_masks_match(index, states)
    start = index.initial_state()
    walk = lambda texts: _walk(index, start, encode(texts))
    assert walk(["client", ".tag", " =", " ", "1"]) is not None
    assert walk(["client", ".session", ".tag", "=", "1"]) is not None
    assert walk(["client", ".tag", " ", "=="]) is None  # a comparison reads the name
    assert walk(["client", ".tag", "("]) is None
    assert walk(["client", ".tag", "+="]) is None
    assert walk(["plain", ".tag", " ="]) is None  # no __dict__: the assignment would fail
    assert walk(["x", " =", " ", "client", ".tag"]) is None  # not a statement start: a read


def _walk(index: TokenIndex, state, ids):
    for token_id in ids:
        state = index.advance(state, token_id)
        if state is None:
            return None
    return state


def test_mask_check_detects_a_wrong_mask():
    vocab = tricky_vocabulary()
    index = monitor_index(vocab, prefix=DOCUMENT + "x = np.")
    state = index.initial_state()
    wrong = index.compute_mask(state)
    wrong[vocab.texts.index("rank")] = True  # "rank" is not a prefix of a numpy member
    index.compute_mask = lambda s: wrong  # type: ignore[method-assign]
    with pytest.raises(AssertionError):
        assert_masks_match(index, [state])


def test_eos_special_padding_and_empty_tokens():
    vocab = tricky_vocabulary()
    index = monitor_index(vocab, prefix=DOCUMENT + "x = np.pro")
    state = index.initial_state()
    mask = index.mask(state)
    eos = next(iter(vocab.eos_ids))
    assert not mask[eos]  # "pro" is not a complete member
    assert not mask[vocab.num_defined :].any()  # padding ids
    assert not mask[vocab.num_defined - 1]  # the special token
    assert (
        mask[eos - 1] or vocab.token_bytes[eos - 1] != b""
    )  # empty ordinary token: valid
    assert index.advance(state, eos) is None
    complete = index.advance(state, vocab.texts.index("d"))
    assert index.mask(complete)[eos]
    assert index.allowed(complete, [eos, vocab.num_defined]).tolist() == [True, False]
    # EOS leads to the terminal state, after which nothing is valid
    assert index.advance(complete, eos) is END
    assert not index.mask(END).any()
    assert index.advance(END, vocab.texts.index("x")) is None


def test_allowed_equals_mask_and_masks_are_cached_read_only():
    vocab = tricky_vocabulary()
    index = monitor_index(vocab, prefix=DOCUMENT + "y = np.linalg.")
    state = index.initial_state()
    ids = list(range(vocab.size))
    lazy = index.allowed(state, ids)
    full = index.mask(state)
    assert np.array_equal(lazy, full)
    assert index.mask(state) is full
    with pytest.raises(ValueError):
        full[0] = True
    assert isinstance(index, TokenConstraint)


def test_advance_is_cached_per_state_and_token():
    vocab = tricky_vocabulary()
    calls = []
    monitor = ApiMonitor(StaticIndex(NAMES))
    original = monitor.check
    monitor.check = lambda s, t: calls.append(t) or original(s, t)  # type: ignore[method-assign]
    index = TokenIndex(monitor, vocab, context=ConstraintContext(DOCUMENT, DOCUMENT))
    state = index.initial_state()
    token = vocab.texts.index("np.array")
    first = index.advance(state, token)
    assert index.advance(state, token) == first
    assert calls.count("np.array") == 1


def _other_constrainers():
    whitelist = Whitelist(["array", "norm", "np", "x", "rank", "matrix_rank"])
    yield whitelist
    yield ForcedPrefix("lin")
    yield ForcedPrefix("")
    yield AllOf(
        ForcedPrefix("alg"), ApiMonitor(StaticIndex(NAMES), roots={"np": ("numpy",)})
    )
    yield AllOf(whitelist, ForcedPrefix("ar"))


@pytest.mark.parametrize(
    "constrainer", list(_other_constrainers()), ids=lambda c: type(c).__name__
)
def test_trie_walk_and_and_masks_equal_brute_force(constrainer):
    vocab = tricky_vocabulary()
    index = TokenIndex(constrainer, vocab, context=ConstraintContext("", "x = np.lin"))
    states = reachable_states(index, random.Random(1), walks=300, steps=6)
    assert_masks_match(index, states)


# -- real tokenizers ------------------------------------------------------------------------
def numpy_names() -> list[str]:
    """Two levels of the installed numpy's public names (a realistic member table)."""
    return module_snapshot("numpy", ("linalg", "random", "fft"))["names"]


SNIPPETS = [
    "x = np.linalg.norm(a, axis=1)\n",
    "y = np.random.randint(0, 10)\n",
    "z = np.array([1.5, 2]).reshape(-1) # np.foo\n",
    's = "np.not_checked" + np.prod(x)\n',
    "w = np.fft.fft(np.zeros(3)).real\n",
    "v = np.product(x) if np.alltrue(y) else np.float_\n",
]


def _real_vocabulary_check(
    vocab: Vocabulary, encode, walks: int, seed: int, max_states: int
) -> int:
    """Random states (chain states first) of a real vocabulary: fast mask == brute force."""
    prompt = "import numpy as np\n"
    index = TokenIndex(
        ApiMonitor(StaticIndex(numpy_names())),
        vocab,
        context=ConstraintContext(prompt, prompt),
    )
    rng = random.Random(seed)
    targets = [encode(text) for text in SNIPPETS]
    states = reachable_states(index, rng, walks=walks, steps=4, targets=targets)
    chain_states = sorted((s for s in states if ApiMonitor.in_chain(s)), key=repr)
    other_states = sorted((s for s in states if not ApiMonitor.in_chain(s)), key=repr)
    assert len(chain_states) >= 10, "the snippets must reach chain states"
    rng.shuffle(chain_states)
    rng.shuffle(other_states)
    chosen = chain_states[: max_states * 2 // 3]
    chosen += other_states[: max_states - len(chosen)]
    assert_masks_match(index, chosen)
    return len(chosen)


def test_tiny_tokenizer_masks_equal_brute_force():
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=len(tokenizer) + 7)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
    assert vocab.decode(encode(SNIPPETS[0])) == SNIPPETS[0]
    checked = _real_vocabulary_check(vocab, encode, walks=20, seed=2, max_states=60)
    assert checked == 60


@pytest.mark.slow
def test_large_tokenizer_masks_equal_brute_force():
    """About 1 s of brute force per state at 120k tokens: 12 states."""
    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer

    tokenizer = build_large_tokenizer(120_000)
    vocab = vocabulary_from_tokenizer(tokenizer)
    assert vocab.size >= 100_000
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
    assert _real_vocabulary_check(vocab, encode, walks=2, seed=3, max_states=12) == 12
    tables = TokenTables.of(vocab)
    assert TokenTables.of(vocab) is tables
    assert len(tables.dot.ids) > 0  # the tokenizer has tokens such as ".append"
