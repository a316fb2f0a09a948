"""`adaptrack-lsp complete FILE[:LINE:COL]`: one completion at a cursor, printed.

LINE and COL are 1-based (COL counts characters); without them the cursor is at the end
of the file.  One sample is the greedy ghost text; `--samples K` (K > 1) draws K exact
samples at max(temperature, 1.0), de-duplicated and ranked by model probability, as the
editor's completion list does.

The API index the cursor needs is computed first (progress on stderr: one line rewritten
in place on a terminal, before the output otherwise; answers are kept on disk, so the next
run loads them); `--timeout-ms` bounds decoding only.

Validity comes from the environment (`--python`, or the trusted workspace's, or this
interpreter's); `--snapshot` puts an API snapshot in front of it for the snapshot's
package (`apis.routed.RoutedIndex`), and `--bundled-snapshots` does so with the bundled
snapshot of each imported package that is not installed: `make demo` on a machine
without TensorFlow checks `tf.` against the TensorFlow 2.21 snapshot.
"""

from __future__ import annotations

import argparse
import re

from adaptrack_lsp.config import model_argument

HELP = "complete FILE at LINE:COL (1-based; end of file when omitted) and print the candidates"

_LOCATION = re.compile(r"^(?P<path>.+):(?P<line>\d+):(?P<col>\d+)$")


def add_arguments(parser) -> None:
    parser.add_argument("location", metavar="FILE[:LINE:COL]", help="file and 1-based cursor position")
    parser.add_argument("--model", default=None, type=model_argument, help="'builtin' (offline, the default), a local folder or a hub id")
    parser.add_argument("--decoder", default=None, help="decoder name (default adaptrack)")
    parser.add_argument(
        "--compare",
        default=None,
        metavar="DECODERS",
        help="comma-separated decoders: print each one's ghost text for the same cursor, one line each "
        "(e.g. unconstrained,constrained,adaptrack)",
    )
    parser.add_argument("--samples", type=int, default=1, help="1 = greedy; K > 1 = K samples, ranked")
    parser.add_argument("--python", default=None, help="interpreter whose installed packages define validity")
    parser.add_argument(
        "--snapshot",
        default=None,
        metavar="FILE|PACKAGE",
        help="check the snapshot's package against an API snapshot instead of the environment: a snapshot file, "
        "or the package name of one bundled with adaptrack-lsp (tensorflow: TensorFlow 2.21); "
        "the other packages are checked against the environment",
    )
    parser.add_argument(
        "--bundled-snapshots",
        action="store_true",
        help="check a package the file imports that is not installed against the snapshot of it bundled with "
        "adaptrack-lsp, where there is one (tensorflow); each row names the snapshot",
    )
    parser.add_argument(
        "--trust-workspace",
        action="store_true",
        help="the working directory is trusted: use its .venv/venv and allow runtime introspection",
    )
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--multiline", action="store_true", help="complete a block, not just the line")
    parser.add_argument(
        "--syntax-constraint",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep the code a prefix of a valid Python program (setting syntaxConstraint, on by default)",
    )
    parser.add_argument("--timeout-ms", type=int, default=None, help="time budget of decoding (index work not counted)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--seed", type=int, default=0, help="random seed for sampling (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    from adaptrack_lsp.commands.serve import add_backend_arguments
    from adaptrack_lsp.commands.target_options import add_target_arguments

    add_backend_arguments(parser)
    add_target_arguments(parser)


def parse_location(location: str) -> tuple[str, int | None, int | None]:
    """(path, line, col) from FILE or FILE:LINE:COL (a path that exists as given wins)."""
    from pathlib import Path

    if Path(location).is_file():
        return location, None, None
    match = _LOCATION.match(location)
    if match:
        return match.group("path"), int(match.group("line")), int(match.group("col"))
    return location, None, None


def cursor_offset(text: str, line: int | None, col: int | None) -> int:
    """Character offset of a 1-based LINE:COL; end of text when omitted."""
    if line is None:
        return len(text)
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        raise ValueError(f"line {line} is outside the file (1..{len(lines)})")
    content = lines[line - 1].rstrip("\r")
    if not 1 <= col <= len(content) + 1:
        raise ValueError(f"column {col} is outside line {line} (1..{len(content) + 1})")
    return sum(len(text_line) + 1 for text_line in lines[: line - 1]) + col - 1


def build_settings(args):
    from adaptrack_lsp.config import parse_settings

    raw = {
        "model": args.model,
        "decoder": args.decoder,
        "numSamples": args.samples,
        "pythonPath": args.python,
        "maxNewTokens": args.max_new_tokens,
        "temperature": args.temperature,
        "timeoutMs": args.timeout_ms,
        "device": args.device,
    }
    from adaptrack_lsp.commands.serve import backend_settings

    raw.update(backend_settings(args))
    if args.multiline:
        raw["multiline"] = True
    if getattr(args, "syntax_constraint", None) is not None:
        raw["syntaxConstraint"] = args.syntax_constraint
    if args.trust_workspace:
        raw["trustedWorkspace"] = True
    from adaptrack_lsp.commands.target_options import target_settings

    raw.update(target_settings(args, "complete"))
    return parse_settings({k: v for k, v in raw.items() if v is not None})


def run(args) -> int:
    import json
    import os
    import sys

    path, line, col = parse_location(args.location)
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", errors="replace")
    except OSError as error:
        print(f"adaptrack-lsp complete: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return 2
    try:
        offset = cursor_offset(text, line, col)
    except ValueError as error:
        print(f"adaptrack-lsp complete: {error}", file=sys.stderr)
        return 2
    if args.python and not os.path.exists(args.python):
        print(f"adaptrack-lsp complete: --python {args.python}: no such interpreter or environment", file=sys.stderr)
        return 2
    from adaptrack_lsp.apis.routed import resolve_snapshot

    explicit: list[str] = []
    if args.snapshot:
        try:
            explicit.append(resolve_snapshot(args.snapshot))
        except FileNotFoundError as error:
            print(f"adaptrack-lsp complete: --snapshot {error}", file=sys.stderr)
            return 2
    try:
        settings, problems = build_settings(args)
    except ValueError as error:
        print(f"adaptrack-lsp complete: {error}", file=sys.stderr)
        return 2
    compared = [name.strip() for name in args.compare.split(",") if name.strip()] if args.compare else []
    from adaptrack_lsp.config import DECODER_NAMES

    for name in compared:
        if name not in DECODER_NAMES:
            problems.append(f"--compare: unknown decoder {name!r}; choose from {', '.join(DECODER_NAMES)}")
    if problems:
        for problem in problems:
            print(f"adaptrack-lsp complete: {problem}", file=sys.stderr)
        return 2

    from adaptrack_lsp.completion.service import CompletionService, ServiceNotReady

    # the bundled snapshots first: a snapshot given with --snapshot wins for its package
    snapshots = [*(bundled_for_missing(text, settings) if args.bundled_snapshots else []), *explicit]
    index_factory = None
    if snapshots:
        from adaptrack_lsp.apis.routed import snapshot_index_factory

        index_factory = snapshot_index_factory(snapshots)
    service = CompletionService(settings, workspace_root=os.getcwd(), index_factory=index_factory)
    if settings.version_targets:  # built (or read from the cache) before the model loads
        from adaptrack_lsp.commands.target_options import strict_targets, target_printer

        service.constraints.target_progress = target_printer("complete")
        service.constraints.strict_targets = strict_targets(args)
        index, info = service.api_index()
        prepare = getattr(index, "prepare", None)
        problem = prepare() if callable(prepare) else info.problem
        if problem:
            print(f"adaptrack-lsp complete: {problem}", file=sys.stderr)
            service.close()
            return 3
    service.warm_up(text)  # the document's imports are indexed while the model loads
    try:
        service.load()
    except ServiceNotReady as error:
        print(f"adaptrack-lsp complete: {error}", file=sys.stderr)
        service.close()
        return 3

    index_progress = StatusLine()

    from adaptrack_lsp.completion.lm.base import ModelError

    connect_error = getattr(service.model, "connect_error", "")
    if connect_error:  # the server backend could not use its inference server
        print(f"adaptrack-lsp complete: {connect_error}", file=sys.stderr)
        service.close()
        return 3
    if compared:
        try:
            return _compare(service, settings, compared, text, offset, path, args.seed, index_progress)
        finally:
            service.close()
    try:
        mode = "list" if settings.num_samples > 1 else "inline"
        result = service.complete(
            text,
            offset,
            mode=mode,
            seed=args.seed,
            wait_for_index=True,
            index_progress=index_progress,
            document=os.path.abspath(path),
        )
    except ModelError as error:
        print(f"adaptrack-lsp complete: {error}", file=sys.stderr)
        return 3
    finally:
        index_progress.clear()
        service.close()
    if result.engine_warning:
        print(f"adaptrack-lsp complete: warning: {result.engine_warning}", file=sys.stderr)
    if result.constraint.problem:
        print(f"adaptrack-lsp complete: warning: not API-constrained: {result.constraint.problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0
    constraint = result.constraint
    packages = ", ".join(f"{name} {version}" for name, version in sorted(constraint.packages.items()))
    print(f"# {path}:{line or 'end'}:{col or ''} model={settings.model} decoder={settings.decoder}")
    print(f"# validity: {constraint.source} {constraint.environment or ''} {packages}".rstrip())
    if constraint.reason:
        print(f"# environment: {constraint.reason}")
    if constraint.syntax:
        print(f"# syntax: {constraint.syntax}")
    if not result.candidates:
        print(f"(no candidates: {result.status} {result.message})".rstrip())
    for rank, candidate in enumerate(result.candidates, 1):
        flag = verdict(candidate, result.constraint)
        print(f"{rank:2d}. {candidate.text!r}  logprob={candidate.logprob:.3f} {flag}")
    counters = result.counters
    print(
        f"# lm_calls={counters.get('lm_calls')} server_calls={counters.get('server_calls', 0)} tokens_fed={counters.get('tokens_fed')} "
        f"backtracks={counters.get('backtracks')} wall_ms={1000 * counters.get('wall_seconds', 0.0):.0f} "
        f"index_ms={1000 * counters.get('index_seconds', 0.0):.0f}"
    )
    return 0


def not_installed(constraint) -> list[str]:
    """Imported packages the environment has no version of (not installed there)."""
    return sorted(name for name, version in constraint.packages.items() if version == "unknown")


def verdict(candidate, constraint) -> str:
    """"INVALID", "valid", or "unchecked": accepted only because the package its chain
    starts from is not installed, so nothing could be checked (never called valid)."""
    if not candidate.valid:
        return "INVALID"
    if not candidate.chains and not_installed(constraint):
        return "unchecked"
    return "valid"


def bundled_for_missing(text: str, settings) -> list[str]:
    """The bundled snapshot files of the packages `text` imports that the environment
    validating completions does not have (`--bundled-snapshots`)."""
    import os

    from adaptrack_lsp.apis.imports import document_roots
    from adaptrack_lsp.apis.index import bundled_snapshot
    from adaptrack_lsp.apis.routed import bundled_snapshot_names, not_installed

    bundled = set(bundled_snapshot_names())
    imported = [path[0] for path in document_roots(text).values() if path and path[0] in bundled]
    if not imported:
        return []
    missing = not_installed(imported, settings.python_path, os.getcwd(), settings.trusted_workspace)
    return [bundled_snapshot(name) for name in missing]


class StatusLine:
    """Progress of the index work on stderr: on a terminal one line, rewritten in place
    and erased before the output; otherwise a line per message (all before the output,
    which is printed once everything is computed)."""

    def __init__(self, stream=None):
        import sys

        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.shown = False

    def __call__(self, message: str) -> None:
        line = f"adaptrack-lsp complete: {message} (kept on disk for the next run) ..."
        if self.tty:
            import shutil

            width = max(20, shutil.get_terminal_size().columns - 1)
            self.stream.write("\r\x1b[K" + (line if len(line) <= width else line[: width - 1] + "\u2026"))
            self.shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _compare(service, settings, decoders: list[str], text: str, offset: int, path: str, seed: int, index_progress) -> int:
    """The rows of `compare_rows`, printed together once all are computed (progress
    never lands between them)."""
    import sys

    rows, warnings = compare_rows(service, settings, decoders, text, offset, path, seed, index_progress)
    clear = getattr(index_progress, "clear", None)
    if clear is not None:
        clear()
    print("\n".join(rows), flush=True)
    for warning in warnings:
        print(f"adaptrack-lsp complete: warning: {warning}", file=sys.stderr)
    return 0


def compare_rows(
    service, settings, decoders: list[str], text: str, offset: int, path: str, seed: int = 0, index_progress=None
) -> tuple[list[str], list[str]]:
    """(lines, warnings): the cursor's line, then one line per decoder with the ghost
    text it writes there, valid or INVALID against the installed packages, or against a
    snapshot, which the row names (``INVALID (tensorflow 2.21.0 snapshot)``)."""
    import os

    from adaptrack_lsp.apis.imports import document_roots

    line_start = text.rfind("\n", 0, offset) + 1
    rows = [f"  {text[line_start:offset].strip()}\u2038   ({path}, model {settings.model})"]
    warnings: list[str] = []
    width = max(len(name) for name in decoders)
    imported = {root[0] for root in document_roots(text).values() if root}
    for name in decoders:
        result = service.complete(
            text,
            offset,
            settings=settings.replace(decoder=name),
            seed=seed,
            wait_for_index=True,
            index_progress=index_progress,
            document=os.path.abspath(path),
        )
        if result.constraint.problem and not warnings:
            warnings.append(f"not API-constrained: {result.constraint.problem}")
        if not result.candidates:
            rows.append(f"  {name:<{width}}  (no completion: {result.status} {result.message})".rstrip())
            continue
        candidate = result.candidates[0]
        flag = verdict(candidate, result.constraint)
        index, _ = service.api_index(settings)
        notes = getattr(index, "notes", {})
        snapshots = [notes[root] for root in sorted(notes) if root in imported]
        packages = ", ".join(
            f"{n} {v}" for n, v in sorted(result.constraint.packages.items()) if v != "unknown" and n not in notes
        )
        if flag == "unchecked":
            note = f" ({', '.join(not_installed(result.constraint))} not installed here{_snapshot_hint(result.constraint)})"
        else:
            parts = snapshots + ([packages] if packages and name == decoders[-1] else [])
            note = f" ({'; '.join(parts)})" if parts else ""
        rows.append(f"  {name:<{width}}  {candidate.text!r:<60} {flag}{note}")
    return rows, warnings


def _snapshot_hint(constraint) -> str:
    """"; --snapshot tensorflow checks it against ..." for a missing package with a
    bundled snapshot."""
    from adaptrack_lsp.apis.routed import bundled_snapshot_names

    bundled = [name for name in not_installed(constraint) if name in bundled_snapshot_names()]
    return f"; --snapshot {bundled[0]} checks it against the bundled snapshot" if bundled else ""
