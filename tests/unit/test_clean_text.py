"""`CleanText`: no control characters, no U+FFFD, valid UTF-8, exactly, in the constraint."""

from __future__ import annotations

import numpy as np
import pytest

from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.completion.service import CompletionService
from adaptrack_lsp.config import Settings
from adaptrack_lsp.constrainers.clean_text import CleanText
from adaptrack_lsp.constrainers.token_index import TokenIndex
from adaptrack_lsp.vocab import Vocabulary, token_text

FORBIDDEN = ["\x18", "\x0f", "\x06", "\x00", "\x1b", "\x7f", "\x85", "\ufffd"]


def esc(data: bytes) -> str:
    return token_text(data)


@pytest.mark.parametrize("text", ["abc", "\t", "\n", "\r\n", "é", "日本", "x = 1\n"])
def test_clean_text_is_accepted(text):
    clean = CleanText()
    assert clean.check(clean.start(), text) == 0


@pytest.mark.parametrize("text", FORBIDDEN + ["a\x18b", "ok\ufffd"])
def test_control_characters_and_replacement_character_are_rejected(text):
    clean = CleanText()
    assert clean.check(clean.start(), text) is None


@pytest.mark.parametrize(
    "pieces, valid",
    [
        ([b"\xe6", b"\x97\xa5"], True),  # 日 across tokens
        ([b"\xe6\x97", b"\xa5x"], True),
        ([b"\xf0\x9f", b"\x98", b"\x80"], True),  # an emoji in three tokens
        ([b"\xe6", b"x"], False),  # interrupted
        ([b"\x97"], False),  # continuation without a lead
        ([b"\xc2", b"\x85"], False),  # U+0085 (C1 control) in two tokens
        ([b"\xef", b"\xbf\xbd"], False),  # U+FFFD in two tokens
        ([b"\xef\xbf", b"\xbd"], False),
        ([b"\xef\xbf", b"\xbc"], True),  # U+FFFC is fine
        ([b"\xed", b"\xa0\x80"], False),  # a UTF-16 surrogate
        ([b"\xc0\xaf"], False),  # overlong
    ],
)
def test_multibyte_characters_across_tokens(pieces, valid):
    clean = CleanText()
    state = clean.start()
    for piece in pieces:
        state = clean.check(state, esc(piece))
        if state is None:
            break
    assert (state is not None and clean.is_complete(state)) == valid
    if pieces == [b"\xe6", b"x"]:
        assert clean.check(clean.check(0, esc(b"\xe6")), "x") is None
    # an unfinished character is not a complete text
    assert not clean.is_complete(clean.check(0, esc(b"\xe6")))


@pytest.fixture(scope="module")
def tiny_vocab():
    from adaptrack_lsp.completion.lm import loading

    return loading.load_model("tiny", device="cpu").vocab


def test_tiny_vocab_has_the_tokens_and_the_mask_excludes_them_exactly(tiny_vocab):
    vocab = tiny_vocab
    index = TokenIndex(CleanText(), vocab)
    ids = {char: vocab.texts.index(char) for char in ["\x18", "\x0f", "\x06"]}
    assert len(ids) == 3
    # U+FFFD comes out of byte tokens that do not make a character: a lone continuation
    # byte, or EF BF followed by BD
    byte_id = {b[0]: i for i, b in enumerate(vocab.token_bytes) if len(b) == 1}
    replacement = [byte_id[0x80], byte_id[0xBF]]
    assert index.advance(index.advance(index.advance(index.initial_state(), byte_id[0xEF]), byte_id[0xBF]), byte_id[0xBD]) is None
    assert index.advance(index.advance(index.advance(index.initial_state(), byte_id[0xEF]), byte_id[0xBF]), byte_id[0xBC]) == 0
    partial = [i for i, b in enumerate(vocab.token_bytes) if b and b[0] >= 0xC2 and esc(b)[0] >= "\udc80"]
    assert partial  # pieces of multi-byte characters exist as well
    start = index.initial_state()
    mask = index.mask(start)
    assert not mask[list(ids.values())].any() and not mask[replacement].any()
    states = {0}
    for token_id in partial:
        state = CleanText().check(0, vocab.texts[token_id])
        if state is not None:
            states.add(state)
    for state in states:  # the cached masks agree with checking every token
        expected = index.brute_force_mask(state)
        assert np.array_equal(index.mask(state), expected), state


TOKENS = ["<eos>", "x", "\x18", "\x0f", "\x06", "\ufffd", " ", "=", "1", "\n"]


def control_loving_model():
    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")

    def conditional(path):
        probs = np.full(len(TOKENS), 1e-3)
        if len(path) < 3:
            for char in ["\x18", "\x0f", "\x06", "\ufffd"]:
                probs[TOKENS.index(char)] = 0.2
            probs[TOKENS.index("x")] = 0.15
        else:
            probs[TOKENS.index("<eos>")] = 0.9
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


@pytest.mark.parametrize("decoder", ["adaptrack", "exact", "constrained"])
def test_candidates_never_carry_control_characters(decoder):
    service = CompletionService(
        Settings(model="tabular", timeout_ms=60_000, max_new_tokens=4, num_samples=8, decoder=decoder, list_decoder=decoder),
        model_loader=lambda s, progress: control_loving_model(),
        index_factory=lambda s, root: None,
    )
    service.load()
    try:
        text = "x = 1\n"
        result = service.complete(text, len(text), mode="list", seed=3)
        assert result.candidates
        for candidate in result.candidates:
            assert not any(char in candidate.text for char in FORBIDDEN), candidate
        # without the constraint (unconstrained decoder) the model's favourites come out
        loose = service.complete(text, len(text), mode="list", seed=3, settings=service.settings.replace(list_decoder="unconstrained"))
        assert any(any(char in c.text for char in FORBIDDEN) for c in loose.candidates)
    finally:
        service.close()
