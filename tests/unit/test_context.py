"""Prompt building: windows, FIM layout and detection, token healing, stop rules, trimming."""

from __future__ import annotations

import string

import pytest

from adaptrack_lsp.completion.context import (
    FIMFormat,
    PromptBuilder,
    PromptPlan,
    detect_bos,
    detect_fim,
    heal_region,
)
from adaptrack_lsp.completion.lm.tabular import TabularLM
from adaptrack_lsp.vocab import Vocabulary

MULTI_CHAR = ["np", ".lin", "alg", "import", " numpy", " as", " np", "= np.", "x", " =", "    ", "\n"]


def make_vocab(extra: list[str] = ()) -> Vocabulary:
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    tokens = ["<eos>"] + [t for t in dict.fromkeys(list(extra) + MULTI_CHAR + chars)]
    return Vocabulary.from_strings(tokens, eos="<eos>")


def make_builder(vocab: Vocabulary | None = None, **kwargs) -> PromptBuilder:
    vocab = vocab or make_vocab()
    lm = TabularLM(vocab, default=[1.0 / vocab.size] * vocab.size)
    return PromptBuilder(vocab=vocab, encode=lm.encode, **kwargs)


def text_of(builder: PromptBuilder, ids) -> str:
    return builder.vocab.decode(ids)


# -- token healing ---------------------------------------------------------------------
def test_heal_region_rules():
    assert heal_region("x = np.lin") == len(".lin")
    assert heal_region("x = np.") == 1
    assert heal_region("x = foo") == 3
    assert heal_region("x = ") == 0
    assert heal_region("x = (") == 0
    assert heal_region("") == 0
    assert heal_region("a" * 200) == 0  # too long to regenerate


def test_healing_backs_up_partial_tokens_and_strips_them():
    builder = make_builder()
    document = "import numpy as np\nx = np.lin"
    plan = builder.build(document, len(document))
    assert plan.heal_text.endswith(".lin")
    # the prompt and the forced text together are exactly the document before the cursor
    assert text_of(builder, plan.prompt_ids) + plan.heal_text == document
    assert plan.constraint_prefix + plan.heal_text == document
    # the answer drops the healed characters
    assert plan.finish(plan.heal_text + "alg.norm(x)\nmore") == "alg.norm(x)"
    # a generation that contradicts what is typed is not an answer
    assert plan.finish("zeros(3)") is None


def test_healing_takes_whole_tokens_that_straddle_the_region():
    builder = make_builder()
    document = "y= np."
    plan = builder.build(document, len(document))
    # greedy tokenization gives "y", "= np." ; the last token covers the "." region
    assert plan.heal_text == "= np."
    assert text_of(builder, plan.prompt_ids) == "y"


def test_no_healing_after_whitespace_or_when_disabled():
    builder = make_builder()
    plan = builder.build("x = ", 4)
    assert plan.heal_text == ""
    assert text_of(builder, plan.prompt_ids) == "x = "
    plan = make_builder(heal=False).build("x = np.lin", 10)
    assert plan.heal_text == "" and text_of(builder, plan.prompt_ids) == "x = np.lin"


def test_healing_inside_an_identifier_trims_the_repeated_rest_of_line():
    builder = make_builder()
    document = "y = np.lin(a)\n"
    cursor = document.index("(") - 1  # np.li|n(a)
    plan = builder.build(document, cursor)
    assert plan.line_suffix == "n(a)"
    assert plan.heal_text.endswith(".li")
    # the model re-types the rest of the line: nothing is left to insert
    assert plan.finish(plan.heal_text + "n(a)") == ""


def test_healing_with_non_concatenating_tokenizer_falls_back_to_split_encoding():
    vocab = make_vocab()
    lm = TabularLM(vocab, default=[1.0 / vocab.size] * vocab.size)

    def encode_with_dummy_prefix(text: str) -> list[int]:  # like SentencePiece's "▁" prefix
        return lm.encode(" " + text)

    builder = PromptBuilder(vocab=vocab, encode=encode_with_dummy_prefix)
    plan = builder.build("x = np.lin", 10)
    assert plan.heal_text == ".lin"
    assert vocab.decode(plan.prompt_ids) == " x = np"


def test_healing_backs_up_tokens_only_where_they_spell_the_end_of_the_text():
    """Healing backs up the last tokens only when they spell the window's last bytes: a
    tokenizer that rewrites a character (as many bytes in all) falls back too."""
    vocab = make_vocab()
    lm = TabularLM(vocab, default=[1.0 / vocab.size] * vocab.size)

    def encode_rewriting_the_last_character(text: str) -> list[int]:
        return lm.encode(text[:-1] + ("X" if text else ""))

    builder = PromptBuilder(vocab=vocab, encode=encode_rewriting_the_last_character)
    plan = builder.build("x = np.lin", 10)
    assert plan.heal_text == ".lin"
    assert vocab.decode(plan.prompt_ids) == "x = nX"


# -- FIM ---------------------------------------------------------------------------------
class FakeTokenizer:
    def __init__(self, vocab: dict[str, int], bos: int | None = None):
        self.vocab = vocab
        self.bos = bos

    def get_vocab(self):
        return dict(self.vocab)

    def __call__(self, text, add_special_tokens=True):
        ids = [ord(c) for c in text]
        if add_special_tokens and self.bos is not None:
            ids = [self.bos] + ids
        return {"input_ids": ids}


@pytest.mark.parametrize(
    "names, family",
    [
        (("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"), "qwen"),
        (("<fim_prefix>", "<fim_suffix>", "<fim_middle>"), "starcoder"),
        (("▁<PRE>", "▁<SUF>", "▁<MID>"), "codellama"),
    ],
)
def test_detect_fim_families(names, family):
    tokenizer = FakeTokenizer({"a": 0, names[0]: 10, names[1]: 11, names[2]: 12})
    fim = detect_fim(tokenizer)
    assert fim == FIMFormat(family, 10, 11, 12)


def test_detect_fim_absent_and_bos():
    assert detect_fim(FakeTokenizer({"a": 0, "<|fim_prefix|>": 1})) is None
    assert detect_fim(None) is None
    assert detect_bos(FakeTokenizer({}, bos=1)) == [1]
    assert detect_bos(FakeTokenizer({})) == []


def test_fim_layout_and_plain_prompt_when_suffix_is_blank():
    vocab = make_vocab(["<P>", "<S>", "<M>"])
    fim_ids = [vocab.names.index(n) for n in ("<P>", "<S>", "<M>")]
    builder = make_builder(vocab, fim=FIMFormat("test", *fim_ids), bos_ids=(0,))
    document = "a = 1\nb = \nc = 3\n"
    cursor = document.index("b = ") + 4
    plan = builder.build(document, cursor)
    assert plan.fim == "test"
    ids = plan.prompt_ids
    assert ids[0] == 0 and ids[1] == fim_ids[0] and ids[-1] == fim_ids[2]
    middle = ids.index(fim_ids[1])
    assert vocab.decode(ids[2:middle]) == document[:cursor]
    assert vocab.decode(ids[middle + 1 : -1]) == document[cursor:]
    # blank text after the cursor: an ordinary left-to-right prompt
    plan = builder.build("a = 1\n", 6)
    assert plan.fim is None and fim_ids[0] not in plan.prompt_ids


# -- windows ----------------------------------------------------------------------------
def test_prefix_window_fits_budget_and_starts_at_a_line():
    builder = make_builder(max_prompt_tokens=120)
    document = "".join(f"v{i} = {i}\n" for i in range(400)) + "z = "
    plan = builder.build(document, len(document))
    assert len(plan.prompt_ids) <= 120
    assert plan.dropped_prefix_chars > 0
    assert document[plan.dropped_prefix_chars - 1] == "\n"
    assert builder.vocab.decode(plan.prompt_ids) == document[plan.dropped_prefix_chars :]


def test_prefix_window_start_is_stable_while_typing():
    """The window start moves in quarter-window steps, not with every keystroke."""
    builder = make_builder(max_prompt_tokens=200)
    document = "".join(f"value_{i} = {i}\n" for i in range(500))
    starts = []
    refed = []
    previous = None
    typed = "result = compute(value_1) + compute(value_2)"  # 44 keystrokes
    for end in range(1, len(typed) + 1):
        text = document + typed[:end]
        plan = builder.build(text, len(text))
        starts.append(plan.dropped_prefix_chars)
        if previous is not None:
            common = 0
            for a, b in zip(previous, plan.prompt_ids):
                if a != b:
                    break
                common += 1
            refed.append(len(plan.prompt_ids) - common)
        previous = plan.prompt_ids
    moves = sum(1 for a, b in zip(starts, starts[1:]) if a != b)
    assert moves <= 1, starts
    # apart from a window move, each keystroke changes only the last few prompt tokens
    assert sorted(refed)[-1 - moves] <= 8, refed


def test_huge_single_line_is_cut_by_characters():
    builder = make_builder(max_prompt_tokens=100)
    document = "x = '" + "a b " * 25_000
    plan = builder.build(document, len(document))
    assert 0 < len(plan.prompt_ids) <= 100


def test_out_of_range_offsets_are_clamped():
    builder = make_builder()
    plan = builder.build("x = 1", 10_000)
    assert plan.line_prefix == "x = 1"
    plan = builder.build("x = 1", -5)
    assert plan.prompt_ids == [] and plan.line_suffix == "x = 1"


# -- stop rules and trimming ------------------------------------------------------------------
def plan_for(line_prefix: str, line_suffix: str = "", multiline: bool = False, next_line: str = "") -> PromptPlan:
    return PromptPlan(
        prompt_ids=[],
        heal_text="",
        constraint_prefix=line_prefix,
        line_prefix=line_prefix,
        line_suffix=line_suffix,
        multiline=multiline,
        next_line=next_line,
    )


def test_single_line_stops_at_end_of_line():
    plan = plan_for("x = ")
    assert not plan.stop("np.zeros(3")
    assert plan.stop("np.zeros(3)\n")
    assert plan.finish("np.zeros(3)\ny = 2") == "np.zeros(3)"


def test_multiline_stops_at_dedent():
    plan = plan_for("    total = ", multiline=True)
    text = "0\n    for v in values:\n        total += v\nreturn"
    assert not plan.stop("0\n    for v in values:\n        total += v\n")
    assert plan.stop(text)
    assert plan.finish(text) == "0\n    for v in values:\n        total += v"


def test_multiline_blank_line_ends_module_level_paragraph():
    plan = plan_for("x = ", multiline=True)
    assert not plan.stop("1\ny = 2\n")
    assert plan.stop("1\ny = 2\n\n")
    assert plan.finish("1\ny = 2\n\nz") == "1\ny = 2"


def test_multiline_stops_when_repeating_following_code():
    plan = plan_for("    a = ", multiline=True, next_line="    return a")
    assert plan.finish("1\n    b = 2\n    return a\n") == "1\n    b = 2"


@pytest.mark.parametrize(
    "line_prefix, line_suffix, generated, expected",
    [
        ("print(np.", ")", "linalg.norm(x))", "linalg.norm(x)"),  # repeated ")" dropped
        ("print(np.", ")", "linalg.norm(x)", "linalg.norm(x)"),  # FIM-style answer kept
        ("f(", ")", "a, b)", "a, b"),
        ("x = ", "", "3   ", "3"),
        ("x = ", " # note", "3 # note", "3"),
    ],
)
def test_suffix_repeat_trimming(line_prefix, line_suffix, generated, expected):
    assert plan_for(line_prefix, line_suffix).finish(generated) == expected
