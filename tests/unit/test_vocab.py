"""Exact token bytes from real tokenizers: byte-level BPE, SentencePiece with byte
fallback, special/added tokens, padding ids and several EOS ids."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
transformers = pytest.importorskip("transformers")

from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)

from adaptrack_lsp.completion.tokenizer_bytes import (
    adds_dummy_prefix,
    bytes_to_unicode,
    round_trip_mismatches,
    tokenizer_scheme,
    vocabulary_from_tokenizer,
)
from adaptrack_lsp.vocab import Vocabulary

SPECIALS = ["<|endoftext|>", "<|im_end|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|file_sep|>"]

SAMPLE_TEXTS = [
    "import numpy as np\nx = np.linalg.norm(a, ord=2)\n",
    "def f(self, *args, **kwargs):\r\n\treturn {'k': [1, 2.5e-3]}  # comment\n",
    "naïve café — 日本語のテキスト 😀🐍 ∑ x²",
    "   leading spaces and trailing   ",
    "\n\n\n",
    "a",
    "",
]


def _corpus() -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["textwrap.py", "string.py", "keyword.py", "fnmatch.py"]
    texts = [(stdlib / n).read_text(encoding="utf-8") for n in names if (stdlib / n).is_file()]
    assert texts, "no stdlib sources found to train a test tokenizer"
    return texts


@pytest.fixture(scope="module")
def byte_level_tokenizer():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", clean_up_tokenization_spaces=False
    )


def _sentencepiece_tokenizer(dummy_prefix: bool):
    """A Llama-2-style BPE: ``▁`` for spaces, ``<0xNN>`` byte fallback for non-ASCII text."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    steps = [normalizers.Replace(" ", "\u2581")]
    if dummy_prefix:
        steps.insert(0, normalizers.Prepend("\u2581"))
    tokenizer.normalizer = normalizers.Sequence(steps)
    decoder_steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if dummy_prefix:
        decoder_steps.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(decoder_steps)
    ascii_alphabet = [chr(c) for c in range(32, 127)] + ["\u2581", "\n", "\t", "\r"]
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=ascii_alphabet,
        limit_alphabet=len(ascii_alphabet),
        show_progress=False,
    )
    ascii_corpus = [text.encode("ascii", "ignore").decode() for text in _corpus()]
    tokenizer.train_from_iterator(ascii_corpus, trainer=trainer)
    # byte tokens <0x00>..<0xFF> are ordinary vocabulary entries right after the specials
    spec = json.loads(tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    shifted = {}
    for token, token_id in vocab.items():
        shifted[token] = token_id if token_id < 3 else token_id + 256
    for byte in range(256):
        shifted[f"<0x{byte:02X}>"] = 3 + byte
    spec["model"]["vocab"] = shifted
    tokenizer = Tokenizer.from_str(json.dumps(spec))
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        clean_up_tokenization_spaces=False,
    )


# -- byte-level BPE -----------------------------------------------------------------------
def test_byte_alphabet_is_a_bijection_over_bytes():
    alphabet = bytes_to_unicode()
    assert sorted(alphabet) == list(range(256))
    assert len(set(alphabet.values())) == 256
    assert alphabet[ord(" ")] == "Ġ" and alphabet[ord("\n")] == "Ċ" and alphabet[ord("a")] == "a"


def test_byte_level_round_trip_and_specials(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    assert tokenizer_scheme(tokenizer) == "byte_level"
    vocab = vocabulary_from_tokenizer(tokenizer)
    assert isinstance(vocab, Vocabulary) and vocab.size == len(tokenizer)
    assert round_trip_mismatches(tokenizer, vocab, SAMPLE_TEXTS) == []
    for text in SAMPLE_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert vocab.decode_bytes(ids) == text.encode("utf-8")
    for name in SPECIALS:
        token_id = tokenizer.convert_tokens_to_ids(name)
        assert vocab.token_bytes[token_id] == b""
        assert token_id in vocab.special_ids
    # every token string maps through the byte alphabet: "Ġ" is a space, "Ċ" a newline
    names = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    spaced = [i for i, n in enumerate(names) if n.startswith("Ġ") and len(n) > 2 and i not in vocab.special_ids]
    assert spaced, "expected merged tokens with a leading space"
    for i in spaced:
        assert vocab.token_bytes[i].startswith(b" ")
        assert len(vocab.token_bytes[i]) >= len(names[i])


def test_byte_level_multibyte_characters_split_over_tokens(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    vocab = vocabulary_from_tokenizer(tokenizer)
    ids = tokenizer.encode("😀", add_special_tokens=False)
    assert len(ids) > 1  # not in the small vocabulary: one token per byte
    assert all(len(vocab.token_bytes[i]) == 1 for i in ids)
    assert vocab.decode_bytes(ids) == "😀".encode()
    # partial UTF-8 maps to lone surrogates in the text view, losslessly
    assert vocab.texts[ids[0]].encode("utf-8", "surrogateescape") == vocab.token_bytes[ids[0]]


def test_padding_ids_beyond_the_tokenizer_are_invalid(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    count = len(tokenizer)
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=count + 37)
    assert vocab.size == count + 37 and vocab.num_defined == count
    for token_id in (count, count + 10, count + 36):
        assert vocab.is_special(token_id)
        assert vocab.text(token_id) == ""
    assert vocab.decode_bytes([count + 1]) == b""
    with pytest.raises(ValueError, match="smaller"):
        vocabulary_from_tokenizer(tokenizer, logits_size=count - 1)


def test_several_eos_ids(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    vocab = vocabulary_from_tokenizer(tokenizer, extra_eos_ids=[5])
    expected = {tokenizer.convert_tokens_to_ids(n) for n in ("<|endoftext|>", "<|im_end|>", "<|file_sep|>")}
    assert expected <= vocab.eos_ids
    # FIM markers are special but do not end a sequence unless asked
    assert tokenizer.convert_tokens_to_ids("<|fim_middle|>") not in vocab.eos_ids
    assert tokenizer.convert_tokens_to_ids("<|fim_middle|>") in vocab.special_ids
    assert 5 in vocab.eos_ids  # the extra id
    with pytest.raises(ValueError, match="outside"):
        vocabulary_from_tokenizer(tokenizer, extra_eos_ids=[len(tokenizer) + 5])


def test_added_non_special_token_contributes_its_text(byte_level_tokenizer):
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=byte_level_tokenizer.backend_tokenizer, eos_token="<|endoftext|>"
    )
    tokenizer.add_tokens(["<custom_marker>", "  "])
    vocab = vocabulary_from_tokenizer(tokenizer)
    marker = tokenizer.convert_tokens_to_ids("<custom_marker>")
    assert vocab.token_bytes[marker] == b"<custom_marker>"
    assert marker not in vocab.special_ids
    text = "x = 1  # <custom_marker> é"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert marker in ids
    assert vocab.decode_bytes(ids) == text.encode()


def test_codellama_end_of_infill_ends_a_sequence(sentencepiece_tokenizers):
    """CodeLlama writes ``▁<EOT>`` after a fill-in-the-middle answer: it must end the
    sequence like ``</s>`` (the FIM markers themselves do not)."""
    import copy

    from adaptrack_lsp.completion.context import detect_fim

    tokenizer = copy.deepcopy(sentencepiece_tokenizers[True])
    markers = ["\u2581<PRE>", "\u2581<SUF>", "\u2581<MID>", "\u2581<EOT>"]
    tokenizer.add_special_tokens({"additional_special_tokens": markers})
    vocab = vocabulary_from_tokenizer(tokenizer)
    assert detect_fim(tokenizer).name == "codellama"
    assert tokenizer.convert_tokens_to_ids("\u2581<EOT>") in vocab.eos_ids
    assert tokenizer.convert_tokens_to_ids("</s>") in vocab.eos_ids
    assert tokenizer.convert_tokens_to_ids("\u2581<MID>") not in vocab.eos_ids
    assert tokenizer.convert_tokens_to_ids("\u2581<MID>") in vocab.special_ids


def test_duplicate_byte_strings_under_different_ids_are_kept(sentencepiece_tokenizers):
    tokenizer = sentencepiece_tokenizers[False]
    vocab = vocabulary_from_tokenizer(tokenizer)
    # byte-fallback <0x61> and the ordinary token "a" are both b"a"
    ids = sorted(i for i, b in enumerate(vocab.token_bytes) if b == b"a")
    assert ids == sorted([tokenizer.convert_tokens_to_ids("<0x61>"), tokenizer.convert_tokens_to_ids("a")])
    node = vocab.trie.root.children["a"]
    assert sorted(node.token_ids) == ids  # the trie lists both ids at the same node


def test_raw_tokenizers_object_is_accepted(byte_level_tokenizer):
    backend = byte_level_tokenizer.backend_tokenizer
    vocab = vocabulary_from_tokenizer(backend)
    assert vocab.size == backend.get_vocab_size(with_added_tokens=True)
    assert vocab.decode_bytes(backend.encode("print('hi')\n", add_special_tokens=False).ids) == b"print('hi')\n"


# -- SentencePiece with byte fallback -----------------------------------------------------
@pytest.fixture(scope="module")
def sentencepiece_tokenizers():
    return {flag: _sentencepiece_tokenizer(flag) for flag in (False, True)}


@pytest.mark.parametrize("dummy_prefix", [False, True])
def test_sentencepiece_byte_fallback_round_trip(dummy_prefix, sentencepiece_tokenizers):
    tokenizer = sentencepiece_tokenizers[dummy_prefix]
    assert tokenizer_scheme(tokenizer) == "sentencepiece"
    assert adds_dummy_prefix(tokenizer) is dummy_prefix
    vocab = vocabulary_from_tokenizer(tokenizer)
    assert vocab.token_bytes[tokenizer.convert_tokens_to_ids("<0xC3>")] == b"\xc3"
    assert vocab.token_bytes[tokenizer.convert_tokens_to_ids("<0x0A>")] == b"\n"
    for name in ("<s>", "</s>", "<unk>"):
        token_id = tokenizer.convert_tokens_to_ids(name)
        assert vocab.token_bytes[token_id] == b"" and token_id in vocab.special_ids
    assert vocab.eos_ids == {tokenizer.convert_tokens_to_ids("</s>")}
    spaced = [i for i, t in enumerate(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))) if t.startswith("\u2581") and len(t) > 1]
    assert spaced and all(vocab.token_bytes[i].startswith(b" ") for i in spaced)
    if dummy_prefix:  # per-token decode() drops the leading space the token really contributes
        assert all(tokenizer.decode([i]).encode() == vocab.token_bytes[i][1:] for i in spaced)
    assert round_trip_mismatches(tokenizer, vocab, SAMPLE_TEXTS) == []
    for text in SAMPLE_TEXTS:
        ids = tokenizer.encode(text, add_special_tokens=False)
        expected = text.encode() if not dummy_prefix or not text else b" " + text.encode()
        assert vocab.decode_bytes(ids) == expected, text
        if any(ord(c) > 127 for c in text):  # non-ASCII text goes through byte fallback
            names = tokenizer.convert_ids_to_tokens(ids)
            assert any(n.startswith("<0x") for n in names)


def test_round_trip_check_detects_a_wrong_mapping(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    vocab = vocabulary_from_tokenizer(tokenizer)
    broken = Vocabulary(
        [b.replace(b" ", b"") for b in vocab.token_bytes], eos_ids=vocab.eos_ids, special_ids=vocab.special_ids
    )
    mismatches = round_trip_mismatches(tokenizer, broken, SAMPLE_TEXTS)
    assert [text for text, _ in mismatches] == [t for t in SAMPLE_TEXTS if " " in t]


def test_unsupported_decoder_is_rejected():
    tokenizer = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="unsupported tokenizer decoder"):
        vocabulary_from_tokenizer(tokenizer)


def test_no_eos_is_an_error():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(["abc abd"], trainers.BpeTrainer(vocab_size=300, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    with pytest.raises(ValueError, match="end-of-sequence"):
        vocabulary_from_tokenizer(tokenizer)
    assert vocabulary_from_tokenizer(tokenizer, extra_eos_ids=[0]).eos_ids == {0}


def test_vocabulary_from_tokenizer_pads_to_the_logits_size(byte_level_tokenizer):
    vocab = vocabulary_from_tokenizer(byte_level_tokenizer, logits_size=len(byte_level_tokenizer) + 3)
    assert vocab.size == len(byte_level_tokenizer) + 3


# -- large tokenizer ----------------------------------------------------------------------
@pytest.mark.slow
def test_large_tokenizer_has_a_qwen2_sized_vocabulary():
    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer

    tokenizer = build_large_tokenizer(120_000)
    assert len(tokenizer) == 120_000
    vocab = vocabulary_from_tokenizer(tokenizer, logits_size=120_320)
    assert vocab.num_defined == 120_000 and vocab.size == 120_320
    assert tokenizer.convert_tokens_to_ids("<|endoftext|>") in vocab.eos_ids
    assert round_trip_mismatches(tokenizer, vocab, SAMPLE_TEXTS) == []
    assert len(set(vocab.token_bytes)) > 119_000  # real, mostly distinct tokens
