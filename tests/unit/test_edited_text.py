"""EditedTextEncoder: after random edits of real files, its ids equal the tokenizer's own
encoding of the whole text, for the built-in model's BPE and the tiny model's tokenizer;
a tokenizer whose split depends on text far from the edit is caught by the second cut
(and the equality check fails without it); only the end is re-encoded while typing."""

from __future__ import annotations

import inspect
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adaptrack_lsp.apis.document import common_prefix_length
from adaptrack_lsp.completion.edited_text import EditedTextEncoder

#: a real file (the standard library's textwrap), with text the tokenizers split in
#: unusual ways appended: long punctuation and space runs, non-ASCII names and strings
SOURCE = inspect.getsource(textwrap) + "\n# " + "=" * 150 + "\nnaïve = '日本語 ünïcode'" + " " * 90 + "\n"
PIECES = ["x", " ", "\n", "<|endoftext|>", "    ", "=", "==", "(", ")", ".", "self.", "é", "日本", "'", '"""', "def f(a, b):\n", "#", "=" * 70, " " * 70]


@pytest.fixture(scope="module")
def tokenizers(builtin_model):
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    tiny = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    tiny_vocab = vocabulary_from_tokenizer(tiny)
    return {
        "builtin": (builtin_model.encode, builtin_model.vocab.byte_lengths),
        "tiny": (lambda text: tiny.encode(text, add_special_tokens=False), tiny_vocab.byte_lengths),
    }


edits = st.lists(
    st.tuples(st.floats(0.0, 1.0), st.integers(0, 80), st.sampled_from(PIECES), st.booleans()),
    min_size=1,
    max_size=12,
)


def apply(text: str, where: float, remove: int, piece: str, near_end: bool) -> str:
    position = int((0.97 + 0.03 * where if near_end else where) * len(text))
    return text[:position] + piece + text[position + remove :]


@pytest.mark.parametrize("name", ["builtin", "tiny"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=edits)
def test_ids_equal_a_fresh_encoding_after_random_edits(tokenizers, name, sequence):
    encode, byte_lengths = tokenizers[name]
    encoder = EditedTextEncoder(encode, byte_lengths)
    text = SOURCE
    assert encoder(text) == list(encode(text))
    for where, remove, piece, near_end in sequence:
        text = apply(text, where, remove, piece, near_end)
        assert encoder(text) == list(encode(text))


@pytest.mark.parametrize("name", ["builtin", "tiny"])
def test_a_special_tokens_name_then_an_edit_after_it(tokenizers, name):
    """A text whose ids do not spell it (a special token's name among them) is never
    kept, whether it was encoded whole or from a cut: a cut placed by its ids would fall
    inside a token of the next text (found by the random edits above)."""
    encode, byte_lengths = tokenizers[name]
    encoder = EditedTextEncoder(encode, byte_lengths)
    text = SOURCE
    assert encoder(text) == list(encode(text))
    for where, piece, near_end in ((0.5, "<|endoftext|>", False), (0.8125, "x", True), (0.9, "y", True)):
        text = apply(text, where, 0, piece, near_end)
        assert encoder(text) == list(encode(text))


def test_typing_at_the_end_re_encodes_the_end_only(tokenizers):
    encode, byte_lengths = tokenizers["builtin"]
    encoder = EditedTextEncoder(encode, byte_lengths)
    text = SOURCE
    encoder(text)
    before = encoder.encoded_bytes
    typed = "result = wrapper.fill(text)\n"
    for end in range(1, len(typed) + 1):
        assert encoder(text + typed[:end]) == list(encode(text + typed[:end]))
    per_keystroke = (encoder.encoded_bytes - before) / len(typed)
    assert per_keystroke < 600 < len(SOURCE.encode()) / 10


class EndAlignedTokenizer:
    """A tokenizer whose split depends on the whole text: chunks of 5 characters counted
    from the end (an edit moves every boundary before it unless it adds a multiple of 5)."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.byte_lengths = np.zeros(100_000, dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        head = len(text) % 5
        chunks = ([text[:head]] if head else []) + [text[i : i + 5] for i in range(head, len(text), 5)]
        found = []
        for chunk in chunks:
            if chunk not in self.ids:
                self.ids[chunk] = len(self.ids)
                self.byte_lengths[self.ids[chunk]] = len(chunk.encode())
            found.append(self.ids[chunk])
        return found


def _edit_sequence_agrees(encoder, encode) -> bool:
    text = SOURCE
    encoder(text)
    for step in range(30):
        text = apply(text, (step * 0.37) % 1.0, step % 3, PIECES[step % len(PIECES)], step % 2 == 0)
        if encoder(text) != encode(text):
            return False
    return True


def test_a_split_that_reaches_across_the_cut_is_caught():
    tokenizer = EndAlignedTokenizer()
    assert _edit_sequence_agrees(EditedTextEncoder(tokenizer.encode, tokenizer.byte_lengths), tokenizer.encode)

    class Unchecked(EditedTextEncoder):  # the naive cut: its second encoding never consulted
        @staticmethod
        def _cut_holds(kept, rest, check) -> bool:
            return True

    assert not _edit_sequence_agrees(Unchecked(tokenizer.encode, tokenizer.byte_lengths), tokenizer.encode)


def test_a_tokenizer_that_rewrites_its_input_is_encoded_whole():
    """A tokenizer that adds a leading space (its tokens spell more than the text): every
    call encodes the whole text, and the ids are still its own."""
    tokenizer = EndAlignedTokenizer()
    encode = lambda text: tokenizer.encode(" " + text)
    encoder = EditedTextEncoder(encode, tokenizer.byte_lengths)
    text = SOURCE
    for typed in ("a", "ab", "abc"):
        assert encoder(text + typed) == encode(text + typed)


def test_common_prefix_length():
    assert common_prefix_length(b"", b"abc") == 0
    assert common_prefix_length(b"abc", b"abc") == 3
    assert common_prefix_length(b"abcd", b"abc") == 3
    long = bytes(range(256)) * 40
    for position in (0, 1, 63, 64, 65, 5000, len(long) - 1):
        changed = long[:position] + bytes([long[position] ^ 1]) + long[position + 1 :]
        assert common_prefix_length(long, changed) == position
        assert common_prefix_length(long, long[:position]) == position
