"""One document analysis per text: incremental edits give the answers of a fresh parse,
and the answers agree with Python's own `tokenize` and `ast`."""

from __future__ import annotations

import ast
import io
import tokenize

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from adaptrack_lsp.apis import document as document_module
from adaptrack_lsp.apis.document import DocumentAnalysis, ImportRef, OpenCall, analysis_of
from adaptrack_lsp.apis.imports import ambiguous_roots, imported_modules, learn_roots
from adaptrack_lsp.completion.project_context import document_imports
from adaptrack_lsp.lsp_server.documents import DocumentAnalyses, LspTextDocument, lsp_lines

FRAGMENTS = [
    "import numpy as np\n",
    "from os import path\n",
    "from . import util\n",
    "import a.b.c\n",
    "from p.q import *\n",
    "try:\n    from lxml import etree\nexcept ImportError:\n    import xml.etree.ElementTree as etree\n",
    'x = "a # b"\n',
    "# c\n",
    "np.zeros(3, dtype=",
    ")\n",
    "f'{x}'",
    "f'a{x!r:>{w}}b'\n",
    "'''doc\n",
    "def f(a, b=1):\n",
    "a.mean(axis=0, ",
    "y = (",
    "    ",
    "\n",
    "\r\n",
    "\r",
    "é",
    "𝔘",
    "\u2028",
    "\ud800",  # a lone surrogate (an editor can send one)
    "x",
    "=",
    ",",
]

#: whole statements: any sequence of them is a Python module
STATEMENTS = [
    "import numpy as np\n",
    "from os import path as p, sep\n",
    "from .. import util\n",
    "import a.b.c, d\n",
    "from p.q import *\n",
    "try:\n    from lxml import etree\nexcept ImportError:\n    import xml.etree.ElementTree as etree\n",
    'x = "a # b"\n',
    "# c import os\n",
    "z = np.zeros(3, dtype=int)  # é 𝔘\n",
    "s = f'{x}' f\"{y!r}\"\n",
    "def f(a, b=1):\n    '''doc é\n    import os'''\n    return a\n",
    "w = a.mean(axis=0, keepdims=True)\n",
    "r = sorted(d.items(), key=lambda kv: kv[1], reverse=g(x, **o)[0])\n",
    "if x:\n    import numpy as xp\n",
    "u = '''multi\n# not a comment\nimport os\n'''\n",
    "v = 'é' + \"𝔘\" + b'\\x00'\n",
    "\n",
]

documents = st.lists(st.sampled_from(FRAGMENTS + STATEMENTS), max_size=12).map("".join)
modules = st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=10).map("".join)


def utf16_units(text: str) -> int:
    return sum(2 if ord(char) > 0xFFFF else 1 for char in text)


@st.composite
def position(draw, text: str, at_least: tuple[int, int] | None = None) -> tuple[int, int]:
    """A valid LSP position (line, UTF-16 character at a character boundary) of `text`,
    not before `at_least`."""
    lines = lsp_lines(text)
    # the position after a final line break is one line past the last
    last = len(lines) if (not lines or lines[-1].endswith(("\n", "\r"))) else len(lines) - 1
    first = at_least[0] if at_least else 0
    line = draw(st.integers(first, last))
    content = lines[line].rstrip("\r\n") if line < len(lines) else ""
    column = draw(st.integers(0, len(content)))
    character = utf16_units(content[:column])
    if at_least and line == at_least[0] and character < at_least[1]:
        character = at_least[1]
    return line, character


def lsp_range(start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    return types.Range(start=types.Position(*start), end=types.Position(*end))


def nodes(tree) -> list[tuple]:
    """Every node of `tree` with its byte range and (row, column) points, in order."""
    found, cursor, down = [], tree.walk(), True
    while True:
        if down:
            node = cursor.node
            found.append((node.type, node.start_byte, node.end_byte, node.start_point, node.end_point, node.is_missing))
        if down and cursor.goto_first_child():
            continue
        if cursor.goto_next_sibling():
            down = True
            continue
        if not cursor.goto_parent():
            return found
        down = False


def same_answers(incremental: DocumentAnalysis, fresh: DocumentAnalysis, call_offsets) -> None:
    assert incremental.text == fresh.text
    assert str(incremental.tree.root_node) == str(fresh.tree.root_node)
    assert nodes(incremental.tree) == nodes(fresh.tree)
    assert incremental.roots == fresh.roots
    assert incremental.modules == fresh.modules
    assert incremental.ambiguous == fresh.ambiguous
    assert incremental.imports == fresh.imports
    assert [incremental.region(i) for i in range(len(fresh.text) + 1)] == [
        fresh.region(i) for i in range(len(fresh.text) + 1)
    ]
    for offset in call_offsets:
        assert incremental.open_call(offset) == fresh.open_call(offset)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(documents, st.data())
def test_incremental_edits_give_the_answers_of_a_fresh_parse(text, data):
    """LSP content changes applied to the tree (and a whole-text change) give the tree
    and the answers of a fresh parse of the resulting text; the text is the one pygls'
    document computes from the same changes."""
    editor = LspTextDocument("file:///a.py", text)
    analysis = DocumentAnalysis.parse(text)
    for _ in range(data.draw(st.integers(1, 4), label="notifications")):
        changes = []
        for _ in range(data.draw(st.integers(1, 3), label="changes")):
            if data.draw(st.integers(0, 9), label="whole") == 0:
                change = types.TextDocumentContentChangeWholeDocument(text=data.draw(documents, label="text"))
            else:
                start = data.draw(position(editor.source), label="start")
                end = data.draw(position(editor.source, start), label="end")
                inserted = data.draw(st.lists(st.sampled_from(FRAGMENTS), max_size=3).map("".join), label="inserted")
                change = types.TextDocumentContentChangePartial(range=lsp_range(start, end), text=inserted)
            editor.apply_change(change)
            changes.append(change)
        analysis = analysis.edited(changes)
        assert analysis.text == editor.source
        if data.draw(st.booleans(), label="read the imports"):  # the next edit may carry them over
            assert (analysis.roots, analysis.imports) == (learn_roots(editor.source), document_imports(editor.source))
    fresh = DocumentAnalysis.parse(editor.source)
    offsets = data.draw(st.lists(st.integers(0, len(fresh.text)), max_size=12), label="call offsets")
    same_answers(analysis, fresh, offsets)
    # a new text reached by the span where the texts differ: the same
    other = data.draw(documents, label="other text")
    same_answers(analysis.with_text(other), DocumentAnalysis.parse(other), offsets if len(other) >= len(fresh.text) else [])


def test_every_offset_of_an_edited_document_agrees_on_calls():
    text = "import numpy as np\nz = np.zeros(3, dtype=int)\ny = a.mean(axis=0, \n"
    editor = LspTextDocument("file:///a.py", text)
    change = types.TextDocumentContentChangePartial(range=lsp_range((1, 22), (1, 25)), text="float, order='C'")
    editor.apply_change(change)
    analysis = DocumentAnalysis.parse(text).edited([change])
    same_answers(analysis, DocumentAnalysis.parse(editor.source), range(len(editor.source) + 1))


# -- references outside the code under test --------------------------------------------------------
def tokenize_regions(text: str) -> list[str | None] | None:
    """Per character: "string" / "comment" / "code" from Python's tokenizer (None inside
    f-strings, which this Python's tokenizer gives as one token); None when the text
    does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    starts = [0]
    for line in io.StringIO(text).readlines():
        starts.append(starts[-1] + len(line))
    regions: list[str | None] = ["code"] * len(text)
    for token in tokens:
        if token.type not in (tokenize.STRING, tokenize.COMMENT):
            continue
        start = starts[token.start[0] - 1] + token.start[1]
        end = starts[token.end[0] - 1] + token.end[1]
        prefix = token.string[: len(token.string) - len(token.string.lstrip("rRbBuUfF"))]
        kind = "comment" if token.type == tokenize.COMMENT else None if "f" in prefix.lower() else "string"
        regions[start:end] = [kind] * (end - start)
    return regions


plain_documents = st.lists(
    st.sampled_from([f for f in FRAGMENTS if f not in ("\r\n", "\r", "\u2028", "\ud800", "'''doc\n")]), max_size=12
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(modules, plain_documents))
def test_regions_agree_with_the_tokenizer(text):
    expected = tokenize_regions(text)
    if expected is None:
        return
    analysis = DocumentAnalysis.parse(text)
    for offset, region in enumerate(expected):
        if region is not None:
            assert analysis.region(offset) == region, (text, offset)


def test_f_string_text_is_string_and_its_expressions_code():
    text = "s = f'a{x!r:>{w}}b' # é\n"
    regions = "".join(DocumentAnalysis.parse(text).region(i)[2] for i in range(len(text)))
    #            s = f'a{x!r:>{w}}b' # é\n
    assert regions == "ddddrrrdddddrddddrrdmmmd"
    assert DocumentAnalysis.parse("").region(0) == "code"


def ast_imports(text: str) -> tuple[dict, frozenset, frozenset, tuple[ImportRef, ...]] | None:
    """The import bindings and `ImportRef`s read from Python's own parse of `text`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, UnicodeEncodeError):  # a lone surrogate does not encode
        return None
    statements = sorted(
        (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))),
        key=lambda node: (node.lineno, node.col_offset),
    )
    roots: dict[str, tuple[str, ...]] = {}
    paths: dict[str, set] = {}
    modules: set[tuple[str, ...]] = set()
    refs: list[ImportRef] = []

    def bind(alias, path):
        roots[alias] = path
        paths.setdefault(alias, set()).add(path)

    for node in statements:
        if isinstance(node, ast.Import):
            for name in node.names:
                path = tuple(name.name.split("."))
                modules.add(path)
                bind(name.asname, path) if name.asname else bind(path[0], path[:1])
                refs.append(ImportRef(0, path, alias=name.asname))
            continue
        base = tuple(node.module.split(".")) if node.module else ()
        names = tuple(name.name for name in node.names)
        refs.append(ImportRef(node.level, base, names, True, tuple(name.asname for name in node.names)))
        if node.level:
            continue
        modules.add(base)
        for name in node.names:
            if name.name != "*":
                bind(name.asname or name.name, base + (name.name,))
    ambiguous = frozenset(alias for alias, bound in paths.items() if len(bound) > 1)
    return roots, frozenset(modules), ambiguous, tuple(refs)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.one_of(modules, documents))
def test_imports_agree_with_python_s_parse(text):
    expected = ast_imports(text)
    if expected is None:
        return
    roots, modules, ambiguous, refs = expected
    analysis = DocumentAnalysis.parse(text)
    assert (analysis.roots, analysis.modules, analysis.ambiguous, analysis.imports) == expected
    # the entry points that take a text give the same answers
    assert learn_roots(text) == roots and imported_modules(text) == modules and ambiguous_roots(text) == ambiguous
    assert document_imports(text) == refs and learn_roots(analysis) == roots


def test_the_statements_make_modules_both_references_read():
    """The reference tests are not vacuous: the statements tokenize and parse, together."""
    text = "".join(STATEMENTS)
    regions = tokenize_regions(text)
    assert regions is not None and {"string", "comment", None} <= set(regions)
    roots, modules, ambiguous, refs = ast_imports(text)
    assert len(refs) == 9 and ambiguous == frozenset({"etree"}) == ambiguous_roots(text)
    assert roots["p"] == ("os", "path") and ("a", "b", "c") in modules


# -- calls ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("import numpy as np\nx = np.zeros(3, dtype=", ("np.zeros", ("dtype",), False)),
        ("y = a.mean(x, axis=1, keepdims=True)", ("a.mean", ("axis", "keepdims"), False)),
        ("f(a, [1, 2", ("f", (), True)),
        ("x = 1\nsorted(y, key=lambda a, b=2: a, rev", ("sorted", ("key",), False)),
        ("g(x)(1, k=", (None, ("k",), False)),
        ("print(x, sep=", ("print", ("sep",), False)),
        ("def f(a, b=1", None),
        ("x = (1, 2", None),
        ("x = foo(1)\ny = 2", None),
        ("s = 'f(a, '", None),
    ],
)
def test_the_open_call_at_the_end(text, expected):
    """The innermost call open at the end of `text` (the closed one: inside its ``)``)."""
    offset = len(text) - 1 if text.endswith(")") else len(text)
    found = DocumentAnalysis.parse(text).open_call(offset)
    assert (found.callee, found.keywords, found.nested) == expected if expected else found is None
    if found is not None:
        assert text[found.start] == "("


def test_an_open_call_is_the_one_python_sees_once_closed():
    """Closing the open call at the offset makes a text Python parses, with that call's
    keywords (a reference from `ast`)."""
    text = "import numpy as np\nz = np.zeros(3, dtype=int, order='C', like=np.ones(2, "
    found = DocumentAnalysis.parse(text).open_call(len(text))
    assert found == OpenCall("np.ones", (), text.rindex("("), False)
    outer = DocumentAnalysis.parse(text).open_call(text.index("like=") + 5)
    closed = ast.parse(text + "))")
    call = closed.body[1].value
    assert outer.callee == ast.unparse(call.func) and list(outer.keywords) == [k.arg for k in call.keywords]


def ast_calls(text: str) -> list[tuple[int, int, OpenCall]]:
    """(offset after the ``(``, offset of the ``)``, the call) for each call of `text`
    with a dotted callee, from Python's own parse (offsets in characters)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno: int, byte_column: int) -> int:  # ast columns count UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:byte_column].decode())

    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
            continue
        callee = ast.unparse(node.func)
        if not all(part.isidentifier() for part in callee.split(".")):
            continue
        paren = offset(node.func.end_lineno, node.func.end_col_offset)
        close = offset(node.end_lineno, node.end_col_offset) - 1
        if text[paren] == "(" and text[close] == ")":
            keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
            found.append((paren + 1, close, OpenCall(callee, keywords, paren, False)))
    return found


@settings(max_examples=200, deadline=None, derandomize=True)
@given(modules)
def test_open_calls_agree_with_python_s_parse(text):
    """Just inside a call's ``(`` and just before its ``)`` the open call is that call,
    with the keywords Python's parse gives it."""
    analysis = DocumentAnalysis.parse(text)
    for after_paren, before_close, call in ast_calls(text):
        assert analysis.open_call(after_paren) == call == analysis.open_call(before_close), (text, call)


# -- incremental, really ---------------------------------------------------------------------------
def test_an_edit_reparses_with_the_edited_old_tree(monkeypatch):
    """Editing one line of a 5,000-line document hands tree-sitter the old tree, edited
    at that line; the ranges whose syntax changed lie on the lines the edit wrote."""
    lines = [f"def f{i}(x):\n    return x + {i}\n" for i in range(2500)]
    text = "import numpy as np\n" + "".join(lines)
    analysis = DocumentAnalysis.parse(text)
    given_trees = []
    real_parse_tree = document_module.parse_tree

    def recording(data, old_tree=None):
        given_trees.append(old_tree)
        return real_parse_tree(data, old_tree)

    monkeypatch.setattr(document_module, "parse_tree", recording)
    line = 1 + 2 * 1200 + 1  # "    return x + 1200"
    change = types.TextDocumentContentChangePartial(range=lsp_range((line, 11), (line, 12)), text="np.sum(\n        x)")
    edited = analysis.edited([change])
    (old_tree,) = given_trees
    assert old_tree is not None and old_tree.root_node.has_changes and old_tree is not analysis.tree
    assert not analysis.tree.root_node.has_changes  # the analysis handed out is untouched
    # the edit moved what follows it where it now stands (bytes and points)
    last_old, last_new = old_tree.root_node.children[-1], edited.tree.root_node.children[-1]
    assert (last_old.start_byte, last_old.start_point) == (last_new.start_byte, last_new.start_point)
    changed = old_tree.changed_ranges(edited.tree)
    assert changed and all(line <= r.start_point[0] <= r.end_point[0] <= line + 1 for r in changed)
    assert str(edited.tree.root_node) == str(DocumentAnalysis.parse(edited.text).tree.root_node)


def test_typing_away_from_the_imports_keeps_their_answers():
    """An edit that touches no import statement (and changes no syntax around one) keeps
    the import answers already read; one that does reads them again."""
    text = "import numpy as np\n\nfrom os import path\nx = '''\n'''\ndef f(x):\n    return np.\n"
    analysis = DocumentAnalysis.parse(text)
    bindings, imports = analysis.bindings, analysis.imports
    typed = analysis.edited([types.TextDocumentContentChangePartial(range=lsp_range((6, 14), (6, 14)), text="zer")])
    assert typed.bindings is bindings and typed.imports is imports
    renamed = typed.edited([types.TextDocumentContentChangePartial(range=lsp_range((0, 16), (0, 18)), text="xp")])
    assert renamed.bindings is not bindings and renamed.roots == {"xp": ("numpy",), "path": ("os", "path")}
    # a quote on the empty line makes the second import part of a string: read again
    quoted = typed.edited([types.TextDocumentContentChangePartial(range=lsp_range((1, 0), (1, 0)), text="'''")])
    fresh = DocumentAnalysis.parse(quoted.text)
    assert quoted.roots == fresh.roots == {"np": ("numpy",)} and quoted.imports == fresh.imports


def test_readers_with_only_the_text_share_one_analysis():
    text = "import numpy as np\nx = np.\n"
    first = analysis_of(text)
    assert analysis_of(text) is first
    typed = analysis_of(text + "z")
    assert typed.text == text + "z" and typed.roots == {"np": ("numpy",)}


# -- the server's open documents -------------------------------------------------------------------
def test_open_documents_keep_one_analysis_edited_with_their_changes():
    documents = DocumentAnalyses()
    uri = "file:///w/a.py"
    editor = LspTextDocument(uri, "import os\nx = os.pa\n")
    opened = documents.opened(uri, editor.source)
    change = types.TextDocumentContentChangePartial(range=lsp_range((1, 9), (1, 9)), text="th")
    editor.apply_change(change)
    edited = documents.changed(uri, [change], editor.source)
    assert edited is not opened and edited.text == "import os\nx = os.path\n"
    assert documents.analysis(uri, editor.source) is edited
    # the analysis is what readers with only the text get
    assert analysis_of(editor.source) is edited and learn_roots(editor.source) == {"os": ("os",)}
    # a change read differently than the editor read it: the editor's text wins
    odd = types.TextDocumentContentChangePartial(range=lsp_range((0, 0), (0, 0)), text="import sys\n")
    assert documents.changed(uri, [odd], "import re\n" + editor.source).roots == {"re": ("re",), "os": ("os",)}
    # a text the kept analysis never saw: brought to it, never a stale answer
    assert documents.analysis(uri, "import json\n").roots == {"json": ("json",)}
    documents.closed(uri)
    assert documents.analysis(uri, "import csv\n").roots == {"csv": ("csv",)}


def test_the_server_edits_each_open_document_s_analysis_with_its_changes(monkeypatch):
    """Over the server's own protocol handling (in process): didOpen parses, didChange
    edits with the UTF-16 ranges the client sends, didClose drops the analysis."""
    import asyncio
    import json

    from adaptrack_lsp.lsp_server.server import create_server

    class Sink:
        def write(self, data: bytes) -> None:
            pass

        def close(self) -> None:
            pass

    server = create_server(service_factory=lambda settings, **kwargs: None)
    server.protocol.set_writer(Sink())
    fallbacks = []  # the changes are applied as sent, never re-derived from the text
    real_with_text = DocumentAnalysis.with_text
    monkeypatch.setattr(DocumentAnalysis, "with_text", lambda self, text: fallbacks.append(text) or real_with_text(self, text))

    def deliver(message: dict) -> None:
        server.protocol.handle_message(json.loads(json.dumps(message), object_hook=server.protocol.structure_message))

    uri = "file:///w/a%20b.py"
    text = "import numpy as np\ns = '𝔘'; z = np.zeros(3, \n"
    edits = [  # (range, text) as a client sends them: UTF-16 units, 𝔘 counts 2
        ({"start": {"line": 1, "character": 26}, "end": {"line": 1, "character": 26}}, "dtype="),
        ({"start": {"line": 1, "character": 5}, "end": {"line": 1, "character": 7}}, "é"),
        ({"start": {"line": 0, "character": 16}, "end": {"line": 0, "character": 18}}, "xp"),
    ]

    async def run():
        deliver({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
        deliver({"jsonrpc": "2.0", "method": "textDocument/didOpen",
                 "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        opened = server.document_analysis(uri)
        answers = []
        for version, (edit_range, inserted) in enumerate(edits, start=2):
            deliver({"jsonrpc": "2.0", "method": "textDocument/didChange",
                     "params": {"textDocument": {"uri": uri, "version": version},
                                "contentChanges": [{"range": edit_range, "text": inserted}]}})
            answers.append(server.document_analysis(uri))
        deliver({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
        await asyncio.sleep(0.05)
        return opened, answers, server.document_analysis(uri)

    opened, answers, closed = asyncio.run(run())
    assert opened.text == text and closed is None
    final = answers[-1]
    assert final.text == "import numpy as xp\ns = 'é'; z = np.zeros(3, dtype=\n"
    assert final.roots == {"xp": ("numpy",)}
    assert final.open_call(len(final.text) - 1) == OpenCall("np.zeros", ("dtype",), final.text.index("(3"), False)
    same_answers(final, DocumentAnalysis.parse(final.text), range(len(final.text) + 1))
    assert len({id(answer) for answer in [opened, *answers]}) == 4 and not fallbacks  # one analysis per version


def test_a_request_reads_the_analysis_it_is_given_and_never_parses_again(monkeypatch):
    """The request builder, the constraint's parts and the checker take the document's
    analysis as it is: with one given, no tree is built for the request."""
    from adaptrack_lsp.apis.static_index import StaticIndex
    from adaptrack_lsp.checking.checker import Checker
    from adaptrack_lsp.completion.request import CompletionRequest
    from adaptrack_lsp.config import Settings
    from adaptrack_lsp.constrainers.environment import text_constraint

    text = "import numpy as np\nimport os.path\n\ndef f(a: np.ndarray):\n    b = np.zeros(3)\n    return b."
    analysis = DocumentAnalysis.parse(text)
    parses = []
    real_parse_tree = document_module.parse_tree
    monkeypatch.setattr(document_module, "parse_tree", lambda *args: parses.append(args) or real_parse_tree(*args))
    request = CompletionRequest.build(text, len(text), settings=Settings(), analysis=analysis)
    assert request.analysis is analysis
    assert request.import_roots == {"np": ("numpy",), "os": ("os",)}
    assert request.receivers["b"] == ("numpy", "zeros", "()") and request.receivers["a"][:2] == ("numpy", "ndarray")
    index = StaticIndex(["numpy.zeros", "numpy.ndarray", "os.path.join"])
    constraint = text_constraint(index=index, document=text, prefix=text, roots=request.bound_names, keywords_index=index, analysis=analysis)
    constraint.constrainer.start(constraint.context)
    Checker(index).check(text, analysis=analysis)
    assert parses == []
    # an analysis of another text is not used: the request reads its own text's
    other = CompletionRequest.build(text + "sum()\n", len(text), settings=Settings(), analysis=analysis)
    assert other.analysis is not analysis and other.analysis.text == text + "sum()\n"
