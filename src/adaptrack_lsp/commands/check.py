"""`adaptrack-lsp check [PATH ...]`: every API use in existing code that does not exist
in the environment or in a version target (docs/check.md).

Files or folders (default ``.``; hidden folders, virtual environments and
``site-packages`` are skipped) are checked one at a time by `checking.checker.Checker`
against the index completions would get (``--python``, ``--target``, ``--target-from`` as in
``explain``; ``--snapshot`` as in ``complete``: a snapshot answers for its own package).  Findings go to stdout in ``--format`` (text,
json, github, sarif); progress, skipped files and regions that do not parse go to
stderr.  Exit status: 0 nothing found, 1 something found, 2 bad usage (a path that
does not exist, an interpreter that cannot run), 3 a version target that cannot be
built with ``--strict-targets`` (without it, that target's package is unchecked under
it, said on stderr, and the other targets are checked).  No file is ever written.
"""

from __future__ import annotations

import os
import sys
import time

HELP = "report the API uses in existing code that do not exist in the installed versions or a version target"

#: seconds between progress lines on stderr (a terminal gets one line rewritten in place);
#: the environment variable ADAPTRACK_PROGRESS_EVERY_S overrides it (0: a line per file)
PROGRESS_EVERY_S = 2.0


def _progress_every_s() -> float:
    import os

    raw = os.environ.get("ADAPTRACK_PROGRESS_EVERY_S")
    if raw is None:
        return PROGRESS_EVERY_S
    try:
        return max(0.0, float(raw))
    except ValueError:
        sys.stderr.write(f"adaptrack-lsp check: ADAPTRACK_PROGRESS_EVERY_S={raw!r} is not a number of seconds\n")
        raise SystemExit(2) from None


def add_arguments(parser) -> None:
    from adaptrack_lsp.checking.formats import FORMATS
    from adaptrack_lsp.commands.target_options import add_target_arguments

    parser.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to check (default: the working directory)")
    parser.add_argument("--format", default="text", choices=FORMATS, help="output format (default: text, path:line:col: message)")
    parser.add_argument("--python", default=None, help="interpreter (or environment folder) whose installed packages define what exists")
    parser.add_argument(
        "--snapshot",
        action="append",
        default=None,
        metavar="FILE|PACKAGE",
        help="check the snapshot's package against an API snapshot instead of the environment: a snapshot file, "
        "or the name of a snapshot bundled with adaptrack-lsp (tensorflow); other packages come from the environment",
    )
    parser.add_argument(
        "--trust-workspace",
        action="store_true",
        help="the working directory is trusted: use its .venv/venv and allow runtime introspection",
    )
    parser.add_argument("--no-deprecated", action="store_true", help="leave out deprecations (reported as notes by default)")
    parser.add_argument(
        "--suggest",
        action="store_true",
        help="also decode version-correct replacements for each finding with the configured model (AdapTrack)",
    )
    parser.add_argument("--model", default=None, help="the model --suggest decodes with (default: the built-in model)")
    add_target_arguments(parser)


def _settings(args):
    from adaptrack_lsp.commands.target_options import target_settings
    from adaptrack_lsp.config import model_argument, parse_settings

    raw = {"pythonPath": args.python}
    if args.trust_workspace:
        raw["trustedWorkspace"] = True
    if args.model:
        raw["model"] = model_argument(args.model)
    raw.update(target_settings(args, "check"))
    return parse_settings({k: v for k, v in raw.items() if v is not None})


class _Progress:
    """Progress on stderr: one line rewritten in place on a terminal, else a line every
    `PROGRESS_EVERY_S` seconds; nothing for a run that ends sooner."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.started = time.monotonic()
        self.last = self.started
        self.shown = False
        self.every_s = _progress_every_s()

    def say(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        self.shown = True
        if self.tty:
            self.stream.write("\r\033[K" + text[:200])
        else:
            self.stream.write(f"adaptrack-lsp check: {text}\n")
        self.stream.flush()

    def line(self, text: str) -> None:
        """A line that stays (a skipped file, a region not checked)."""
        if self.tty and self.shown:
            self.stream.write("\r\033[K")
        self.stream.write(f"adaptrack-lsp check: {text}\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()


def run(args) -> int:
    from adaptrack_lsp.checking.checker import Checker
    from adaptrack_lsp.checking.files import ProjectModules, python_files, read_source
    from adaptrack_lsp.checking.formats import Report, record

    def fail(message: str, code: int = 2) -> int:
        print(f"adaptrack-lsp check: {message}", file=sys.stderr)
        return code

    paths = args.paths or ["."]
    missing = [path for path in paths if not os.path.exists(path)]
    if missing:
        return fail(f"no such file or folder: {', '.join(missing)}")
    if args.python:
        args.python = os.path.abspath(os.path.expanduser(args.python)) if os.sep in args.python or os.path.exists(args.python) else args.python
        if os.sep in args.python and not os.path.exists(args.python):
            return fail(f"--python {args.python}: no such interpreter or environment")
    snapshots = []
    if args.snapshot:
        from adaptrack_lsp.apis.routed import resolve_snapshot

        try:
            snapshots = [resolve_snapshot(value) for value in args.snapshot]
        except FileNotFoundError as error:
            return fail(f"--snapshot {error}")
    try:
        settings, problems = _settings(args)
    except ValueError as error:
        return fail(str(error))
    if problems:
        return fail("; ".join(problems))

    from adaptrack_lsp.commands.target_options import strict_targets, target_printer
    from adaptrack_lsp.constrainers.environment import ConstraintEnvironment

    progress = _Progress()
    factory = None
    if snapshots:
        from adaptrack_lsp.apis.routed import snapshot_index_factory

        factory = snapshot_index_factory(snapshots)
    environment = ConstraintEnvironment(os.getcwd(), factory)
    environment.target_progress = target_printer("check")
    environment.strict_targets = strict_targets(args)
    try:
        index, info = environment.api_index(settings)
        problem = info.problem
        if index is not None and not problem:
            prepare = getattr(index, "prepare", None)  # version targets: built or read here, once
            if callable(prepare):
                problem = prepare()
            check = getattr(index, "check_interpreter", None)
            if not problem and check is not None:
                problem = check()
        if problem or index is None:
            return fail(problem or "no API index", 3 if settings.version_targets else 2)
        checker = Checker(index, progress=lambda text: progress.say(text, force=True))
        suggester = None
        if args.suggest:
            from adaptrack_lsp.checking.fixes import Suggester

            suggester = Suggester(settings, environment, progress=progress.line, checker=checker)
        report = Report(args.format, sys.stdout)
        project = ProjectModules(paths)
        files = 0
        for position, found in enumerate(python_files(paths), 1):
            path = os.path.normpath(found)
            progress.say(f"checking {path} ({position} files so far)")
            text, skipped = read_source(path)
            if text is None:
                progress.line(f"{path}: skipped: {skipped}")
                report.note(path, f"skipped: {skipped}")
                continue
            files += 1
            result = checker.check(text, local_modules=project.for_file(path), path=path)
            for line, column, what in result.unparsed:
                progress.line(f"{path}:{line}:{column}: {what}")
                report.note(path, f"{line}:{column}: {what}")
            findings = [f for f in result.findings if not (args.no_deprecated and f.deprecated)]
            items = []
            for finding in findings:
                suggestions = (
                    suggester.suggest(text, finding, path=path, local_modules=project.for_file(path)) if suggester is not None else None
                )
                items.append(record(path, finding, suggestions))
            report.add(items)
        progress.done()
        report.finish(files)
        if files == 0 and not report.notes:
            print("adaptrack-lsp check: no Python file found", file=sys.stderr)
        return 1 if any(item["kind"] != "deprecated" for item in report.items) else 0
    finally:
        environment.close()
