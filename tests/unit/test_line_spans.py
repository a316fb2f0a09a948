"""The Python-syntax constraint's logical lines, scanned on from the last prompt's: equal
to a scan from the start after any sequence of edits (`python_syntax.line_spans`)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from adaptrack_lsp.constrainers import python_syntax
from adaptrack_lsp.constrainers.python_syntax import line_spans

#: pieces that move logical line ends: quotes of every kind, escapes, brackets, comments
PIECES = ['"""', "'''", '"', "'", "\\", "\\\n", "\n", "\r\n", "(", ")", "[", "]", "#", "x = ", "a", " ", '""', "''"]


def fresh(text: str):
    python_syntax._last_spans = ("", (), 0)
    return line_spans(text)


@st.composite
def edit_sequences(draw):
    text = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=40)))
    texts = [text]
    for _ in range(draw(st.integers(1, 6))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 6)))
        insert = "".join(draw(st.lists(st.sampled_from(PIECES), max_size=4)))
        if draw(st.booleans()):  # typing at the end, the common case
            start = end = len(text)
        text = text[:start] + insert + text[end:]
        texts.append(text)
    return texts


@settings(max_examples=400, deadline=None)
@given(edit_sequences())
def test_spans_scanned_on_equal_a_fresh_scan(texts):
    expected = [fresh(text) for text in texts]
    python_syntax._last_spans = ("", (), 0)
    for text, answer in zip(texts, expected):
        assert line_spans(text) == answer, text


def test_closing_quotes_typed_later_join_the_lines_again():
    """``x = \"\"\"a"`` is a whole line until closing quotes follow; then the string
    runs on and the line with it (the case a scan that kept the first span would miss)."""
    first = 'y = 1\nx = """a"\nz = 2\n'
    second = first + '"""\n'
    python_syntax._last_spans = ("", (), 0)
    line_spans(first)
    assert line_spans(second) == fresh(second)
    assert fresh(first)[0][1] == (6, 16) and fresh(second)[0][1][1] > 16
