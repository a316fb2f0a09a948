"""`python_lexemes.code_starts` across prompts: after random edits of a real file (with
strings, comments, brackets and backslashes), the answer scanned from the states kept
for the prompt before equals a scan from the start, and typing at the end rescans the
end only."""

from __future__ import annotations

import inspect
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from adaptrack_lsp.constrainers import python_lexemes
from adaptrack_lsp.constrainers.python_lexemes import code_starts

SOURCE = inspect.getsource(textwrap) * 2
PIECES = ["'", '"', '"""', "'''", "#", "\n", "(", ")", "[", "]", "{", "}", "\\", "\\\n", "x = 1\n", " ", "f'{a}'"]


def fresh(prefix: str) -> tuple[int, int]:
    return python_lexemes._code_starts(prefix, (0, 0, 0, 0))[0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 40), st.sampled_from(PIECES), st.floats(0.0, 1.0)), min_size=1, max_size=10))
def test_answers_from_kept_states_equal_a_scan_from_the_start(edits):
    text = SOURCE
    assert code_starts(text[: len(text) // 2]) == fresh(text[: len(text) // 2])
    for where, remove, piece, cursor in edits:
        position = int(where * len(text))
        text = text[:position] + piece + text[position + remove :]
        prefix = text[: int((0.5 + 0.5 * cursor) * len(text))]
        assert code_starts(prefix) == fresh(prefix)


def test_typing_at_the_end_rescans_the_end_only(monkeypatch):
    scanned = []
    original = python_lexemes._code_starts

    def counting(prefix, state):
        scanned.append(len(prefix) - state[0])
        return original(prefix, state)

    monkeypatch.setattr(python_lexemes, "_code_starts", counting)
    monkeypatch.setattr(python_lexemes, "_last_scan", (None, (0, 0), ()))  # nothing kept
    document = SOURCE + "\nresult = wrap(text, width=7"
    code_starts(document)
    for typed in ", tabsize=4)":
        document += typed
        assert code_starts(document) == original(document, (0, 0, 0, 0))[0]
    assert scanned[0] == len(document) - len(", tabsize=4)")
    assert max(scanned[1:]) <= 2 * python_lexemes.CHECKPOINT_CHARS
