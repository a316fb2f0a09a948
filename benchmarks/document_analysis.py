"""What a keystroke costs the document analysis, against parsing the text again.

Types a line, one character per keystroke, in the middle of a generated module (imports,
then functions with calls, strings and comments) and measures per keystroke, in one run:

- ``fresh``: `DocumentAnalysis.parse` of the new text and its import answers (what each
  reader paid when it parsed the text itself);
- ``edit``: the LSP change applied to the previous analysis (`edited`: the tree edited
  and parsed again with it) and its import answers (carried over: the keystroke touches
  no import);
- ``text``: `learn_roots(text)`, a reader that has only the text (the analysis kept by
  text, reached by one edit from the last text);
- ``request``: the completion request built on the edited analysis at the cursor
  (`CompletionRequest.build`: the typed receivers, the names the document assigns, the
  cursor's paths; no project context), everything a keystroke reads of the document.

Every keystroke's incremental tree is checked against the fresh one.

    python benchmarks/document_analysis.py [--lines 5000] [--keystrokes 40]
    python benchmarks/document_analysis.py --smoke   # 300 lines, 5 keystrokes

Last line: ``lines=... fresh_ms=... edit_ms=... text_ms=... request_ms=... fresh_over_edit=...`` (medians).
"""

from __future__ import annotations

import argparse
import statistics
import time

from lsprotocol import types

from adaptrack_lsp.apis.document import DocumentAnalysis
from adaptrack_lsp.apis.imports import learn_roots
from adaptrack_lsp.completion.request import CompletionRequest


def module(lines: int) -> str:
    head = "import numpy as np\nfrom os import path\nimport collections.abc as cabc\n\n"
    body = []
    for i in range((lines - 4) // 4):
        body.append(f"def f{i}(x, y=None):\n")
        body.append(f"    '''Return x scaled ({i}).'''  # note {i}\n")
        body.append(f"    z = np.zeros(x, dtype=float) + path.sep.count('{i}')\n")
        body.append("    return z\n")
    return head + "".join(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--keystrokes", type=int, default=40)
    parser.add_argument("--smoke", action="store_true", help="300 lines, 5 keystrokes (a run check)")
    args = parser.parse_args()
    if args.smoke:
        args.lines, args.keystrokes = 300, 5
    text = module(args.lines)
    typed = "    w = np.linalg.norm(z, axis=0, keepdims=True)"[: args.keystrokes]
    start = text.index("\n", len(text) // 2) + 1
    text = text[:start] + "\n" + text[start:]  # an empty line to type on
    line = text[:start].count("\n")
    analysis = DocumentAnalysis.parse(text)
    learn_roots(analysis)
    learn_roots(text)
    fresh, edit, text_only, request = [], [], [], []
    for column, char in enumerate(typed):
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line, column), end=types.Position(line, column)), text=char
        )
        began = time.perf_counter()
        analysis = analysis.edited([change])
        roots = analysis.roots
        edit.append(time.perf_counter() - began)
        began = time.perf_counter()
        reparsed = DocumentAnalysis.parse(analysis.text)
        fresh_roots = reparsed.roots
        fresh.append(time.perf_counter() - began)
        began = time.perf_counter()
        text_roots = learn_roots(analysis.text + " ")
        text_only.append(time.perf_counter() - began)
        began = time.perf_counter()
        CompletionRequest.build(analysis.text, start + column + 1, analysis=analysis)
        request.append(time.perf_counter() - began)
        assert roots == fresh_roots == text_roots, (roots, fresh_roots, text_roots)
        assert str(analysis.tree.root_node) == str(reparsed.tree.root_node)
    fresh_ms, edit_ms, text_ms, request_ms = (statistics.median(times) * 1000 for times in (fresh, edit, text_only, request))
    print(
        f"{len(typed)} keystrokes on line {line} of {text.count(chr(10))}: fresh {fresh_ms:.2f} ms, edit {edit_ms:.2f} ms, "
        f"text {text_ms:.2f} ms, request {request_ms:.2f} ms"
    )
    print(
        f"lines={text.count(chr(10))} fresh_ms={fresh_ms:.2f} edit_ms={edit_ms:.2f} text_ms={text_ms:.2f} request_ms={request_ms:.2f} "
        f"fresh_over_edit={fresh_ms / edit_ms:.1f}"
    )


if __name__ == "__main__":
    main()
