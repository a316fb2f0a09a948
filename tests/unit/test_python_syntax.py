"""The Python syntax constraint (`constrainers/python_syntax.py`): what it accepts and
rejects and why, partial lexemes, where a completion may end, the per-request setup from
the enclosing blocks, syntax errors before the cursor, time limits, full-vocabulary masks
against brute force, and a small sample of the CPython check the benchmark runs in full."""

from __future__ import annotations

import functools
import random
import time

import pytest

from adaptrack_lsp.constrainers.environment import text_constraint, token_constraint
from adaptrack_lsp.constrainers.python_syntax import PythonSyntax, SyntaxCheckOff, load_table, skeleton_of

#: whole programs (Python 3.11) whose every prefix, cut at every character, is accepted
PROGRAMS = [
    "x = 1\n",
    "match = 1\nmatch(x).y()\nmatch[0] = case = 2\n",
    "match command.split():\n    case [action]:\n        pass\n    case [\"go\", direction] if direction:\n        pass\n"
    "    case Point(x=0, y=_) | {\"k\": -1, **rest} | (1, *others) | -1 + 2j | str() as s:\n        pass\n    case _:\n        pass\n",
    "if (n := len(a)) > 10:\n    print(f\"{n!r:>10} {a['k']}\")\nelif n:\n    pass\nelse:\n    pass\n",
    "try:\n    pass\nexcept* (ValueError, TypeError) as group:\n    pass\n",
    "try:\n    a\nexcept E as e:\n    b\nelse:\n    c\nfinally:\n    d\n",
    "with (open(a) as f, open(b) as g,):\n    pass\nwith open(a) as (x, y), b:\n    pass\n",
    "@functools.lru_cache(maxsize=None)\n@property\n@a[0].b\nasync def f(a, /, b: int = 1, *args: int, c, **kw) -> list[int]:\n"
    "    async with x as y:\n        async for z in w:\n            await z\n    return *a, b\n",
    "def g(*args: *Ts): yield from h()\nlambda a, /, b=1, *c, d, **e: (yield)\n",
    "print(*a, b, *c, d=1, *e, **f, g=2)\nf(x for x in y if x if z for w in x)\n{**a, 'b': 1}\n{*a, *b}\n[*a, *b]\n",
    "x = [y async for y in z]\nd = {k: v for k, v in items}\ns = {a for a in b}\nt = a[*b, 1:2, ::3]\n",
    "x = 0x1F + 0o17 + 0b1_0 + 1_000.5e-3j + .5 + 1. + 1e10 + 1if y else 2\n",
    "s = rb'abc' Rb\"x\" f'{a}' '''multi\nline''' \"\"\"doc\"\"\" u'x' br'\\d'\n",
    "x = 1 + \\\n    2\ny = (1,\n     2)  # a comment\n# only a comment\n\n\nz = 3; w = 4;\n",
    "from . import (a, b,)\nfrom ... import c\nfrom .. pkg import d as e\nimport a.b as c, d\n",
    "class A(B, metaclass=M):\n    '''Doc.'''\n    x: int = 1\n\n    def f(self):\n        global g\n        del self.x, y[0]\n"
    "        assert x, 'msg'\n        raise E from e\n        return\n",
    "if x:\n\tpass\n",
    "x = 'caf\u00e9'\n\u00e9t\u00e9 = 1\n",
]


def feed_chars(syntax: PythonSyntax, prefix: str, text: str):
    state = syntax.prepare(prefix)
    for offset, char in enumerate(text):
        following = syntax.check(state, char)
        if following is None:
            return None, offset, syntax.rejection(state, char)
        state = following
    return state, None, ""


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_prefix_of_valid_programs_is_accepted_and_the_whole_is_complete(program):
    syntax = PythonSyntax()
    state, offset, reason = feed_chars(syntax, "", program)
    assert state is not None, f"rejected at {offset} ({program[max(0, offset - 20): offset + 1]!r}): {reason}"
    assert syntax.is_complete(state)
    # in one piece too, and as a cursor before the last line (the per-request setup)
    assert syntax.is_complete(syntax.check(syntax.prepare(""), program))
    cut = program.rstrip("\n").rfind("\n") + 1
    other = PythonSyntax()
    assert other.is_complete(other.check(other.prepare(program[:cut]), program[cut:]))


@pytest.mark.parametrize(
    ("prefix", "text", "offset", "reason"),
    [
        ("", "x = foo(a))", 10, "')' closes no open bracket"),
        ("x = [", "1)", 1, "')' does not close '['"),
        ("def f():\n", "return 1", 0, "expected an indented block"),
        ("if x:\n    a\n", "  b", 2, "unindent does not match any outer indentation level"),
        ("", "x = 'abc\n", 8, "unterminated string literal"),
        ("", "x = $", 4, "invalid character '$'"),
        ("", "f(a=1, b)", 8, "cannot come here"),
        ("", "x = 0xg", 6, "invalid number literal"),
        ("", "else:", 4, "'else' cannot come here"),
        ("x = ", "= 1", 0, "cannot come here"),
        ("", "x = 1 \\ y", 7, "after line continuation"),
        ("", "x = b'caf\u00e9'", 9, "bytes can only contain ASCII"),
        ("if x:\n", "\tpass\n        y", 14, "inconsistent use of tabs"),
    ],
)
def test_rejections_give_the_first_rejected_character_and_why(prefix, text, offset, reason):
    state, rejected_at, why = feed_chars(PythonSyntax(), prefix, text)
    assert state is None and rejected_at == offset, (rejected_at, why)
    assert why.startswith("Python syntax: ") and reason in why


def test_pending_lexemes_are_accepted_while_they_can_still_become_a_terminal():
    syntax = PythonSyntax()
    start = syntax.prepare("if x ")
    assert syntax.check(start, "=") is not None  # may become "=="
    assert syntax.check(start, "= 1") is None  # "=" cannot follow "if x"
    assert syntax.check(start, "!") is not None and syntax.check(start, "!x") is None
    names = syntax.prepare("x = ")
    assert syntax.check(names, "r") is not None and syntax.check(names, "rb'") is not None
    assert syntax.check(names, "1e") is not None and not syntax.is_complete(syntax.check(names, "1e"))
    assert syntax.is_complete(syntax.check(names, "1e5"))
    assert syntax.check(names, "..") is not None and syntax.check(names, "...") is not None
    assert syntax.check(names, "..x") is None  # ". ." then a name is not an expression
    statement = syntax.prepare("")
    assert syntax.check(statement, "ma") is not None and syntax.check(statement, "match") is not None
    assert syntax.check(statement, "while") is not None and syntax.check(statement, "while)") is None


def test_an_open_line_is_a_prefix_but_not_a_program():
    syntax = PythonSyntax()
    state = syntax.check(syntax.prepare("def f(a):\n    return "), "foo(a,")
    assert state is not None and not syntax.is_complete(state)
    assert syntax.check(state, "\n") is not None  # a newline inside brackets continues the line
    assert syntax.is_complete(syntax.check(state, "\n        b)\n"))


def test_where_an_insertion_may_end_before_more_code():
    inside_call = PythonSyntax(suffix=")\nprint(y)\n")
    state = inside_call.prepare("x = foo(")
    assert inside_call.is_complete(inside_call.check(state, "a, b"))  # the rest of the line closes it
    assert not inside_call.is_complete(inside_call.check(state, "a, b)"))  # "))" would not parse
    assert not inside_call.is_complete(inside_call.check(state, "bar(a"))  # opens a bracket it leaves open
    before_lines = PythonSyntax(suffix="\nprint(y)\n")
    state = before_lines.prepare("x = ")
    assert before_lines.is_complete(before_lines.check(state, "1"))
    assert not before_lines.is_complete(before_lines.check(state, "'abc"))
    at_end = PythonSyntax(suffix="  # trailing comment\n\n")
    assert at_end.at_document_end
    assert not at_end.is_complete(at_end.check(at_end.prepare(""), "if x:"))


DOCUMENT = '''"""Module docstring with code-like lines:
def not_code(:
"""
import os


@decorator(
    arg,
)
class Config(Base):
    """Doc."""

    def load(self, path):
        try:
            with open(path) as handle:
                data = handle.read()
        except OSError as error:
            raise ValueError(
                f"cannot read {path}"
            ) from error
        else:
            if data:
                return data
            elif not data:
                pass
        finally:
            self.closed = True
        match data:
            case [first, *rest]:
                return first
            case _:
                return None

    async def run(self):
        for item in self.items:
            await item
        else:
            pass


def main():
    x = {
        "a": [1, 2,
              3],
    }
    return x
'''


def test_the_setup_state_equals_parsing_the_whole_prefix():
    """At every line start and many positions inside lines, the state parsed from the
    skeleton accepts the rest of the document, and the whole is a program."""
    positions = sorted({i + 1 for i, c in enumerate(DOCUMENT) if c == "\n"} | set(range(0, len(DOCUMENT), 7)))
    for position in positions:
        syntax = PythonSyntax()
        state = syntax.prepare(DOCUMENT[:position])
        rest = syntax.check(state, DOCUMENT[position:])
        assert rest is not None and syntax.is_complete(rest), (position, DOCUMENT[max(0, position - 30) : position])


def test_the_skeleton_holds_only_the_blocks_around_the_cursor():
    cursor = DOCUMENT.index("            await item") + len("            await")
    skeleton, _ = skeleton_of(DOCUMENT[:cursor])
    assert skeleton == (
        "@decorator(\n    arg,\n)\n"  # a decorator belongs to the class it decorates
        "class Config(Base):\n"
        "    async def run(self):\n"
        "        for item in self.items:\n"
        "            await"
    )
    cursor = DOCUMENT.index("        finally:")
    skeleton, _ = skeleton_of(DOCUMENT[:cursor])
    assert skeleton.startswith("@decorator(\n    arg,\n)\nclass Config(Base):\n    def load(self, path):\n        try:\n            pass\n")
    assert "        except OSError as error:\n            pass\n        else:\n            if data:" in skeleton


def test_setup_on_a_long_file_parses_a_short_skeleton():
    body = "".join(f"    def method_{i}(self, value):\n        return value + {i}\n\n" for i in range(700))
    document = "class Big:\n" + body + "    def last(self):\n        x = ("
    skeleton, _ = skeleton_of(document)
    assert document.count("\n") > 2000 and skeleton.count("\n") <= 3
    syntax = PythonSyntax()
    syntax.prepare(document)
    assert syntax.setup_chars < 100


def test_a_syntax_error_before_the_cursor_turns_the_constraint_off_with_the_reason():
    prefix = "import os\nx = foo(a))\n\ny = "
    with pytest.raises(SyntaxCheckOff, match=r"line 2\): '\)' closes no open bracket"):
        PythonSyntax().prepare(prefix)
    built = text_constraint(document=prefix, prefix=prefix, syntax=True, clean=True)
    assert built.off == ("syntax: syntax error before the cursor (line 2): ')' closes no open bracket",)
    assert not isinstance(built.constrainer, PythonSyntax)  # clean text alone remains
    ok = text_constraint(document="x = ", prefix="x = ", syntax=True)
    assert isinstance(ok.constrainer, PythonSyntax) and ok.off == ()


def test_pathological_inputs_are_time_limited():
    syntax = PythonSyntax()
    began = time.perf_counter()
    with pytest.raises(SyntaxCheckOff, match="too long"):
        syntax.prepare("x = [" + "(" * 200_000, limit_s=0.05)
    assert time.perf_counter() - began < 5.0
    deep = PythonSyntax()
    state = deep.prepare("x = " + "(" * 300)
    began = time.perf_counter()
    assert deep.check(state, ")" * 300 + "\n") is not None
    assert time.perf_counter() - began < 2.0


def test_the_table_keeps_conflicts_for_the_glr_parse():
    table = load_table()
    assert load_table() is table
    assert any(len(moves) > 1 for state in table.actions for moves in state.values())


@functools.lru_cache(maxsize=1)
def _tiny_vocab():
    from transformers import AutoTokenizer

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_model_path()))
    return tokenizer, vocabulary_from_tokenizer(tokenizer, logits_size=len(tokenizer) + 7)


#: one state per lexer mode (between lexemes; pending name, keyword prefix, string prefix,
#: operator, number; string body, triple-quoted, bytes escape, empty; line start;
#: comment; continuation)
MASK_PREFIXES = [
    "x = ", "x = rb", "if x:\n    pass\nel", "x = self.", "y = a =", "x = 1e", "x = '''abc\n", 'x = b"a\\', 'x = ""',
    "def f():\n", "# comment", "x = 1 \\",
]  # fmt: skip
MORE_MASK_PREFIXES = [
    "def f(a):\n    return foo(a, ", "class A:\n    def f(self):\n        x = 1\n", "s = 'abc", "x = r", "x = 1", "x = 0x",
    "z = (1,\n", "x = [a for a in b if", "def f():\n    ", "print(x", "x = ..", "from .", "i", "try:\n    pass\n",
    "x = 1.", "x = 1_", "match x:\n    case ", "x = f'{a}' ",
]  # fmt: skip


def _assert_masks_equal_brute_force(prefixes, cuts: int, seed: int) -> None:
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    tokenizer, vocab = _tiny_vocab()
    rng = random.Random(seed)
    prefixes = list(prefixes)
    ids = tokenizer.encode(DOCUMENT, add_special_tokens=False)
    for cut in rng.sample(range(1, len(ids)), cuts):  # cursors at the model's own token boundaries
        prefixes.append(vocab.decode(ids[:cut]))
    for prefix in prefixes:
        syntax = PythonSyntax()
        state = syntax.prepare(prefix)
        index = TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))
        mask, brute = index.compute_mask(state), index.brute_force_mask(state)
        different = [vocab.texts[i] for i in (mask != brute).nonzero()[0][:5]]
        assert not different, (prefix, different)
        assert mask.any()


def test_masks_equal_brute_force_on_the_tiny_vocabulary():
    _assert_masks_equal_brute_force(MASK_PREFIXES, cuts=3, seed=4)


@pytest.mark.slow
def test_masks_equal_brute_force_in_more_states():
    _assert_masks_equal_brute_force(MORE_MASK_PREFIXES, cuts=20, seed=5)


def test_masks_kept_for_one_request_equal_brute_force():
    """One request's masks share what they can (a pending name no continuation turns into
    a keyword or a string prefix stands for all such names; walks are kept per stacks):
    every state still gets its own brute-force mask, in any order."""
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    _, vocab = _tiny_vocab()
    prefix = "import numpy as np\n\nx = np."
    syntax = PythonSyntax()
    start = syntax.prepare(prefix)
    index = TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))
    names = ["mod", "long", "i", "f", "ex", "in", "tr", "rb", "mat", "match", "void", "Rb", "el", "x_1", "is", "n"]
    for name in names + names[::-1]:
        state = syntax.check(start, name)
        assert state is not None, name
        mask, brute = index.compute_mask(state), index.brute_force_mask(state)
        different = [vocab.texts[i] for i in (mask != brute).nonzero()[0][:5]]
        assert not different, (name, different)
    plain = [syntax.check(start, name) for name in ("mod", "long", "void")]
    assert len({id(syntax.token_mask(state, index)) for state in plain}) == 1  # one mask for the three


def test_token_constraint_composes_syntax_with_the_other_parts():
    _, vocab = _tiny_vocab()
    constraint = token_constraint(vocab, document="x = foo(a", prefix="x = foo(a", syntax=True, clean=True)
    assert constraint.off == ()
    state = constraint.initial_state()
    close = vocab.texts.index(")")
    assert constraint.advance(state, close) is not None
    assert constraint.advance(constraint.advance(state, close), close) is None
    broken = token_constraint(vocab, document="x = )", prefix="x = )", syntax=True)
    assert broken.off and broken.off[0].startswith("syntax: syntax error before the cursor")


def test_a_sample_of_real_files_against_cpython():
    """The benchmark's check on 3 files (4 mutants each): no false rejection at any token
    boundary (Python's and the tiny BPE's) or setup cursor, and the mutants CPython rejects
    are rejected (the wrong answer, accepting them, is what `missed` counts)."""
    from adaptrack_lsp.evaluation.syntax_check import check_corpus, corpus

    tokenizer, vocab = _tiny_vocab()
    files = corpus(3, seed=7)
    report = check_corpus(
        files,
        bpe=lambda text: [vocab.texts[i] for i in tokenizer.encode(text, add_special_tokens=False)],
        setup_cursors=3,
        mutants_per_file=4,
        seed=7,
    )
    assert report.files == 3 and report.tokenize_boundaries > 100 and report.bpe_boundaries > 100
    assert report.false_rejections == []
    assert report.mutants >= 8
    assert report.caught >= 0.75 and report.soundness_line >= 0.5, report.outcomes


@pytest.mark.parametrize("program", ["type Alias = int\n", "def f[T](x: T) -> T: pass\n", "f'{x['k']}'\n"])
def test_python_312_syntax_is_not_accepted(program):
    syntax = PythonSyntax()
    after = syntax.check(syntax.prepare(""), program)
    assert after is None or not syntax.is_complete(after)


@pytest.mark.parametrize("program", ["return 1\n", "1 = x\n", "def f(a=1, b): pass\n", "nonlocal x\n"])
def test_what_compile_checks_after_the_grammar_passes(program):
    """Documented gaps (docs/syntax.md): CPython rejects these after its grammar."""
    syntax = PythonSyntax()
    assert syntax.is_complete(syntax.check(syntax.prepare(""), program))


def test_too_many_readings_give_up_on_the_rest_of_the_completion(monkeypatch):
    from adaptrack_lsp.constrainers import python_syntax

    monkeypatch.setattr(python_syntax, "MAX_PARSES", 1)
    syntax = PythonSyntax()
    state = syntax.check(syntax.prepare(""), "match (x) ")  # a call and a match statement
    assert syntax.is_free(state) and syntax.is_complete(state)
    assert syntax.check(state, "))) anything") is state


def test_masks_kept_across_requests_equal_brute_force(monkeypatch):
    """Requests share one parser per table (`shared_parser`): its stacks, walks and masks
    carry over, so a later request (another prefix, the same states) reuses them; every
    mask still equals brute force, for requests in any order, and once the parser is
    past its size a fresh one serves new requests while one under way keeps its own."""
    from adaptrack_lsp.constrainers import python_syntax
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    _, vocab = _tiny_vocab()
    prefixes = ["import numpy as np\n\nx = np.", "import numpy as np\n\nx = np.ze", "def f(a):\n    return g(a, ", "import numpy as np\n\nx = np."]
    requests = []
    for prefix in prefixes:
        syntax = PythonSyntax()
        requests.append((syntax, syntax.prepare(prefix), TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))))
    assert len({id(syntax.parser) for syntax, _, _ in requests}) == 1
    for syntax, start, index in requests + requests[::-1]:
        for text in ("", "mod", "long", "x_1", "el"):
            state = syntax.check(start, text)
            if state is None:
                continue
            mask, brute = index.compute_mask(state), index.brute_force_mask(state)
            assert not (mask != brute).any(), (text, [vocab.texts[i] for i in (mask != brute).nonzero()[0][:5]])
    first = requests[0][0]
    monkeypatch.setattr(python_syntax, "MAX_SHARED_NODES", first.parser.size - 1)
    fresh = PythonSyntax()
    assert fresh.parser is not first.parser
    for syntax, prefix in ((first, prefixes[0]), (fresh, prefixes[0])):
        state = syntax.prepare(prefix)
        index = TokenIndex(syntax, vocab, context=ConstraintContext(prefix, prefix))
        assert not (index.compute_mask(state) != index.brute_force_mask(state)).any()
