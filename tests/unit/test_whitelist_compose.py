"""Whitelist (allowed words with case variants), ForcedPrefix (token healing) and AllOf."""

from __future__ import annotations

import random

import numpy as np
import pytest

from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
from adaptrack_lsp.constrainers.compose import AllOf, ForcedPrefix
from adaptrack_lsp.constrainers.token_index import TokenIndex
from adaptrack_lsp.constrainers.whitelist import Whitelist, word_variants
from adaptrack_lsp.vocab import Vocabulary


def accepts(constrainer, text: str) -> bool:
    return constrainer.check(constrainer.start(None), text) is not None


def complete(constrainer, text: str) -> bool:
    state = constrainer.check(constrainer.start(None), text)
    return state is not None and constrainer.is_complete(state)


# -- whitelist -----------------------------------------------------------------------------
def test_word_variants_match_the_paper():
    assert word_variants("cat") == ["cat", "Cat", "CAT", " cat", " Cat", " CAT"]
    assert word_variants("Paris") == [
        "paris",
        "Paris",
        "PARIS",
        " paris",
        " Paris",
        " PARIS",
    ]


def test_whitelist_words_and_case_variants():
    whitelist = Whitelist(["cat", "dog", "sat"])
    assert complete(whitelist, "The cat sat.") is False  # "The" is not listed
    assert complete(whitelist, "Cat sat, DOG sat!\n")
    assert complete(whitelist, " cat")
    assert accepts(whitelist, "ca") and not complete(whitelist, "ca")
    assert not accepts(whitelist, "cats")
    assert not accepts(whitelist, "cAt")
    strict = Whitelist(["cat"], case_variants=False)
    assert accepts(strict, "cat") and not accepts(strict, "Cat")


def test_whitelist_bad_input():
    with pytest.raises(ValueError):
        Whitelist([])
    with pytest.raises(ValueError):
        Whitelist(["two words"])


def test_whitelist_token_level_space_prefixed_tokens():
    """Tokens such as " ca" + "t" (the paper's "_ca"-"t") are accepted by the trie walk."""
    vocab = Vocabulary.from_strings(
        [" ca", "t", " Ca", "ts", " dog", ".", "x", "<eos>"], eos="<eos>"
    )
    index = TokenIndex(Whitelist(["cat", "dog"]), vocab)
    root = index.initial_state()
    mask = index.mask(root)
    allowed = {vocab.name(i) for i in np.flatnonzero(mask)}
    assert allowed == {" ca", " Ca", " dog", ".", "<eos>"}
    after = index.advance(root, vocab.names.index(" ca"))
    allowed = {vocab.name(i) for i in np.flatnonzero(index.mask(after))}
    assert allowed == {"t"}  # "ts" would spell "cats"; EOS needs a complete word


# -- forced prefix and AND -------------------------------------------------------------------
def test_forced_prefix():
    forced = ForcedPrefix("lin")
    assert (
        accepts(forced, "l")
        and accepts(forced, "lin")
        and accepts(forced, "linalg.norm")
    )
    assert not accepts(forced, "x") and not accepts(forced, "li_")
    assert not complete(forced, "li") and complete(forced, "lina")
    assert complete(ForcedPrefix(""), "")
    with pytest.raises(TypeError):
        ForcedPrefix(3)  # type: ignore[arg-type]


def test_all_of_flattens_and_requires_every_part():
    both = AllOf(ForcedPrefix("ab"), AllOf(Whitelist(["abc", "abd"])))
    assert len(both.parts) == 2
    assert complete(both, "abc") and complete(both, "abd abc")
    assert not accepts(both, "b") and not accepts(both, "abx")
    assert not complete(both, "a")
    with pytest.raises(ValueError):
        AllOf()
    with pytest.raises(TypeError):
        AllOf("text")  # type: ignore[arg-type]


def test_token_healing_with_the_api_monitor():
    """Prompt cut back to ``x = np.`` (healing the partial ``lin``): the regenerated text
    must start with ``lin`` and continue a real numpy chain; a token that covers the
    boundary (``linalg``) is allowed, one that leaves the prefix is not."""
    names = ["numpy.linalg.norm", "numpy.linspace", "numpy.log"]
    monitor = ApiMonitor(StaticIndex(names))
    constraint = AllOf(ForcedPrefix("lin"), monitor)
    vocab = Vocabulary.from_strings(
        [
            "lin",
            "linalg",
            "li",
            "nsp",
            "ace",
            "alg",
            ".norm",
            "log",
            "n",
            "linx",
            "<eos>",
        ],
        eos="<eos>",
    )
    document = "import numpy as np\nx = np.lin"
    index = TokenIndex(
        constraint,
        vocab,
        context=ConstraintContext(document, "import numpy as np\nx = np."),
    )
    root = index.initial_state()
    allowed = {vocab.name(i) for i in np.flatnonzero(index.mask(root))}
    assert allowed == {"lin", "linalg", "li"}
    state = index.advance(root, vocab.names.index("linalg"))
    assert {vocab.name(i) for i in np.flatnonzero(index.mask(state))} == {
        ".norm",
        "<eos>",
    }
    assert np.array_equal(index.mask(state), index.brute_force_mask(state))


def test_composed_masks_equal_brute_force_on_random_states():
    vocab = Vocabulary.from_strings(
        ["a", "b", "ab", " ", "ba", "abc", " a", ".", "c", "<eos>"], eos="<eos>"
    )
    constraint = AllOf(
        ForcedPrefix("ab"), Whitelist(["abc", "ab", "ba"], case_variants=False)
    )
    index = TokenIndex(constraint, vocab)
    rng = random.Random(5)
    checked = 0
    for _ in range(200):
        state = index.initial_state()
        for _ in range(rng.randint(0, 5)):
            assert np.array_equal(
                index.compute_mask(state), index.brute_force_mask(state)
            )
            checked += 1
            valid = [
                i for i in np.flatnonzero(index.mask(state)) if i not in vocab.eos_ids
            ]
            if not valid:
                break
            state = index.advance(state, rng.choice(valid))
    assert checked > 200
