"""`adaptrack-lsp index`: write an API snapshot of a package as installed in an environment.

The public API walk runs in a subprocess started with the environment's interpreter
(`constrainers/introspect_worker.py --walk`), so the snapshot states what *that*
environment provides.  See `constrainers/snapshot.py` for the format.
"""

from __future__ import annotations

HELP = "write an API snapshot (dotted public names) of a package installed in a Python environment"

DEFAULT_MAX_DEPTH = 8
DEFAULT_TIMEOUT_S = 1800.0


def add_arguments(parser) -> None:
    parser.add_argument("--python", metavar="PATH", default=None,
                        help="interpreter (or virtualenv directory) of the environment to index "
                             "(default: the interpreter running adaptrack-lsp)")
    parser.add_argument("--package", metavar="NAME", required=True, help="top-level module to index, e.g. tensorflow")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write the snapshot here (.json or .json.gz); default: stdout")
    parser.add_argument("--max-depth", type=int, default=DEFAULT_MAX_DEPTH, metavar="N",
                        help=f"deepest name, in dotted parts after the package (default {DEFAULT_MAX_DEPTH})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"give up on the walk after this long (default {DEFAULT_TIMEOUT_S:g})")


def make_snapshot(python: str, package: str, max_depth: int = DEFAULT_MAX_DEPTH, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Walk `package` in the environment of `python`; the snapshot dict.

    Raises RuntimeError with the worker's last stderr lines when the walk fails."""
    import json
    import os
    import subprocess

    from adaptrack_lsp.constrainers.introspection import WORKER_SCRIPT
    from adaptrack_lsp.constrainers.snapshot import validate_snapshot

    command = [python, "-I", str(WORKER_SCRIPT), "--walk", package, "--max-depth", str(max_depth)]
    try:
        completed = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"walking {package} took longer than {timeout_s:g} s") from None
    except OSError as error:
        raise RuntimeError(f"cannot run {python}: {error}") from None
    if completed.returncode != 0:
        tail = "\n".join(completed.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"walking {package} with {python} failed (exit {completed.returncode}):\n{tail}")
    try:
        data = json.loads(completed.stdout)
        validate_snapshot(data, "walk output")
    except ValueError as error:
        raise RuntimeError(f"walking {package} gave unreadable output: {error}") from None
    return data


def run(args) -> int:
    import json
    import sys

    from adaptrack_lsp.constrainers.jedi_index import find_python
    from adaptrack_lsp.constrainers.snapshot import write_snapshot

    if args.max_depth < 1:
        print("adaptrack-lsp index: --max-depth must be at least 1", file=sys.stderr)
        return 2
    python, _, problem = find_python(args.python)
    if problem:
        print(f"adaptrack-lsp index: {problem}", file=sys.stderr)
        return 2
    try:
        data = make_snapshot(python, args.package, args.max_depth, args.timeout)
    except RuntimeError as error:
        print(f"adaptrack-lsp index: {error}", file=sys.stderr)
        return 1
    if args.output:
        write_snapshot(data, args.output)
        where = args.output
    else:
        sys.stdout.write(json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n")
        where = "stdout"
    print(
        f"{data['package']} {data.get('version') or 'unknown'}: {len(data['names'])} names "
        f"(max depth {args.max_depth}) -> {where}",
        file=sys.stderr,
    )
    return 0
