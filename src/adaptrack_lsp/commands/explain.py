"""`adaptrack-lsp explain FILE[:LINE:COL] --text TEXT`: whether the constraints accept a
completion at a cursor and, if not, the first rejected character and why.

The constraint is the one completions get (`constrainers.environment.text_constraint`,
the composition `token_constraint` puts over a model's vocabulary), built from the
document, the cursor and the settings as for `complete`; no model is loaded.  TEXT is
checked one character at a time: the first character no continuation can follow is
the rejected offset, and the rejecting part says why (`Constrainer.rejection`).

- `accepted`: TEXT can still be continued into something the constraints allow.
- `complete`: prefix + TEXT is allowed as it stands (Python syntax: at the end of the
  document, a whole valid program; before more code, TEXT closes what it opened and
  the rest of the cursor's line can follow).

`--constraints` names the parts (`PARTS`; default: what the settings turn on).
`--target SPEC` / `--target-from FILE` add version targets (docs/versions.md): the text
must then be valid in each target version too; a target that cannot be built (offline,
no wheel, it does not import) is named on stderr and its package is unchecked under it
(`--strict-targets`: exit 3 instead); `-v` prints each target's environment.
`--avoid-deprecated`: deprecated APIs count as absent (the setting ``avoidDeprecated``).
`--stdin-jsonl` checks many texts in one process: one ``{"prefix": ..., "text": ...}``
per line in (the prefix is the document before the cursor, nothing after it), one
``{"accepted", "complete", "offset", "reason"}`` per line out.
"""

from __future__ import annotations

from adaptrack_lsp.checking.explainer import PARTS, Explainer, parse_parts

HELP = "say whether the constraints accept TEXT at FILE:LINE:COL, and if not, where and why"


def add_arguments(parser) -> None:
    parser.add_argument("location", nargs="?", metavar="FILE[:LINE:COL]", help="file and 1-based cursor position (end of file when omitted)")
    parser.add_argument("--text", default=None, help="the completion to check, as inserted at the cursor")
    parser.add_argument(
        "--stdin-jsonl",
        action="store_true",
        help='check many texts: one {"prefix": ..., "text": ...} per line on stdin, one verdict per line on stdout',
    )
    parser.add_argument(
        "--constraints",
        default=None,
        help=f"comma-separated parts to check ({', '.join(PARTS)}); default: what the settings turn on",
    )
    parser.add_argument("--python", default=None, help="interpreter whose installed packages define validity")
    parser.add_argument("--snapshot", default=None, help="API snapshot JSON instead of the live environment")
    parser.add_argument(
        "--trust-workspace",
        action="store_true",
        help="the working directory is trusted: use its .venv/venv and allow runtime introspection",
    )
    parser.add_argument(
        "--avoid-deprecated",
        action="store_true",
        help="deprecated APIs count as absent, as completions with the setting avoidDeprecated",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    from adaptrack_lsp.commands.target_options import add_target_arguments

    add_target_arguments(parser)


def _settings(args):
    from adaptrack_lsp.commands.target_options import target_settings
    from adaptrack_lsp.config import parse_settings

    raw = {"pythonPath": args.python, "apiSnapshot": args.snapshot}
    if args.trust_workspace:
        raw["trustedWorkspace"] = True
    if args.avoid_deprecated:
        raw["avoidDeprecated"] = True
    raw.update(target_settings(args, "explain"))
    return parse_settings({k: v for k, v in raw.items() if v is not None})


def run(args) -> int:
    import json
    import os
    import sys

    def fail(message: str) -> int:
        print(f"adaptrack-lsp explain: {message}", file=sys.stderr)
        return 2

    if args.stdin_jsonl == (args.location is not None):
        return fail("give FILE[:LINE:COL] with --text, or --stdin-jsonl (one of them)")
    if args.location is not None and args.text is None:
        return fail("--text TEXT is needed with FILE[:LINE:COL]")
    if args.stdin_jsonl and args.text is not None:
        return fail("--text is not used with --stdin-jsonl (each input line has its text)")
    if args.python:
        args.python = os.path.abspath(os.path.expanduser(args.python)) if os.sep in args.python or os.path.exists(args.python) else args.python
        if os.sep in args.python and not os.path.exists(args.python):
            return fail(f"--python {args.python}: no such interpreter or environment")
    if args.snapshot and not os.path.isfile(args.snapshot):
        return fail(f"--snapshot {args.snapshot}: no such file")
    try:
        settings, problems = _settings(args)
    except ValueError as error:
        return fail(str(error))
    if problems:
        return fail("; ".join(problems))
    try:
        parts = parse_parts(args.constraints, settings)
    except ValueError as error:
        return fail(str(error))

    def progress(message: str) -> None:
        print(f"adaptrack-lsp explain: {message} (kept on disk for the next run) ...", file=sys.stderr, flush=True)

    from adaptrack_lsp.commands.target_options import strict_targets, target_printer

    explainer = Explainer(settings, parts, workspace_root=os.getcwd(), progress=progress, target_progress=target_printer("explain"),
                          strict_targets=strict_targets(args))
    if getattr(args, "verbose", 0) and explainer.index is not None:  # -v: each target's environment too
        for line in describe_environments(explainer.index):
            print(f"adaptrack-lsp explain: {line}", file=sys.stderr)
    if explainer.problem and settings.version_targets:  # --strict-targets: never checked against fewer versions than asked
        explainer.close()
        print(f"adaptrack-lsp explain: {explainer.problem}", file=sys.stderr)
        return 3
    if explainer.problem:
        # never answer "accepted" for everything because the environment cannot be read
        explainer.close()
        return fail(f"the API checks cannot run: {explainer.problem}")
    try:
        if args.stdin_jsonl:
            return _run_jsonl(explainer, sys.stdin, sys.stdout)
        from adaptrack_lsp.commands.complete import cursor_offset, parse_location

        path, line, col = parse_location(args.location)
        try:
            with open(path, "rb") as handle:
                document = handle.read().decode("utf-8", errors="replace")
        except OSError as error:
            return fail(f"cannot read {path}: {error.strerror or error}")
        try:
            offset = cursor_offset(document, line, col)
        except ValueError as error:
            return fail(str(error))
        verdict = explainer.explain(document[:offset], args.text, document[offset:], path=str(path))
    finally:
        explainer.close()
    if args.json:
        print(json.dumps(verdict))
    else:
        print(describe(verdict, args.text, parts))
    return 0


def _run_jsonl(explainer: Explainer, source, sink) -> int:
    import json

    failed = False
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict) or not isinstance(item.get("prefix"), str) or not isinstance(item.get("text"), str):
                raise ValueError('expected an object with string fields "prefix" and "text"')
        except ValueError as error:
            failed = True
            print(json.dumps({"error": f"input line {number}: {error}"}), file=sink, flush=True)
            continue
        print(json.dumps(explainer.explain(item["prefix"], item["text"])), file=sink, flush=True)
    return 1 if failed else 0


def describe_environments(index) -> list[str]:
    """One line per version target: the versions checked and the environment each was
    indexed in (the time its dependencies are as of, what was installed, notes), and
    the targets that could not be built (``explain -v``, ``doctor``)."""
    lines = []
    for note in getattr(index, "notes", None) or ():
        lines.append(note)
    for target in getattr(index, "targets", None) or ():
        environment = getattr(target, "environment", None) or {}
        installed = environment.get("installed") or {}
        as_of = environment.get("as_of") or ""
        when = f"dependencies as of {as_of[:10]}" if as_of else "dependencies as of the build"
        listed = ", ".join(f"{name} {version}" for name, version in sorted(installed.items())) or "not recorded"
        lines.append(f"{target.package} {target.version}: {when}: {listed}")
        for note in environment.get("notes") or ():
            lines.append(f"{target.package} {target.version}: {note}")
        skipped = getattr(target, "skipped_modules", None) or {}
        if skipped:
            shown = ", ".join(sorted(skipped)[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
            lines.append(f"{target.package} {target.version}: {len(skipped)} submodules do not import there (unchecked): {shown}")
    for failure in getattr(index, "failures", None) or ():
        lines.append(f"{failure} (its package is unchecked under that target)")
    return lines


def describe(verdict: dict, text: str, parts: list[str]) -> str:
    """The verdict for a person: accepted or not, where, why, with the text marked; a
    module a version target's snapshot does not hold is named as unchecked."""
    notes = [f"note: {line}" for line in verdict.get("unchecked") or ()]
    checked = ", ".join(parts)
    if verdict["accepted"]:
        ending = "and may end there" if verdict["complete"] else "but cannot end there"
        lines = [f"accepted ({checked}): the text can follow the cursor {ending}"]
        if verdict["reason"] and verdict["complete"]:
            lines.append(f"note: {verdict['reason']}")
        return "\n".join(lines + notes)
    offset = verdict["offset"]
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    shown = text[line_start : len(text) if line_end < 0 else line_end]
    return "\n".join(
        [
            f"rejected ({checked}) at offset {offset} ({text[offset]!r}): {verdict['reason']}",
            f"  {shown}",
            "  " + " " * (offset - line_start) + "^",
            *notes,
        ]
    )
