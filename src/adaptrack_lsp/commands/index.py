"""`adaptrack-lsp index`: write an API snapshot of a package as installed in an environment.

The public API walk runs in a contained subprocess started with the environment's
interpreter (`constrainers.snapshot.walk_snapshot`), so the snapshot states what *that*
environment provides: its public names and the signatures of its functions and classes
(so a target version that is not installed constrains keyword arguments too).  See
`apis/snapshot.py` for the format.

``--requirement 'numpy==1.24.4'`` indexes a version that is not installed: it is
installed (wheels only) into a throwaway environment under the cache root and walked
there (`apis.targets.target_snapshot`, the snapshot a version target uses; a range
indexes its highest release with a wheel for this Python).
"""

from __future__ import annotations

from adaptrack_lsp.apis.snapshot import DEFAULT_MAX_DEPTH, walk_snapshot
from adaptrack_lsp.apis.snapshot import DEFAULT_WALK_TIMEOUT_S as DEFAULT_TIMEOUT_S

HELP = "write an API snapshot (dotted public names and call signatures) of a package installed in a Python environment"


def add_arguments(parser) -> None:
    parser.add_argument("--python", metavar="PATH", default=None,
                        help="interpreter (or virtualenv directory) of the environment to index "
                             "(default: the interpreter running adaptrack-lsp)")
    parser.add_argument("--package", metavar="NAME", default=None, help="top-level module to index, e.g. tensorflow")
    parser.add_argument("--requirement", metavar="SPEC", default=None,
                        help="index this release instead, installed in its own environment under the cache "
                             "(e.g. 'numpy==1.24.4'; a range takes its highest release with a wheel)")
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write the snapshot here (.json or .json.gz); default: stdout")
    parser.add_argument("--max-depth", type=int, default=DEFAULT_MAX_DEPTH, metavar="N",
                        help=f"deepest name, in dotted parts after the package (default {DEFAULT_MAX_DEPTH})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                        help=f"give up on the walk after this long (default {DEFAULT_TIMEOUT_S:g})")


def run(args) -> int:
    import json
    import sys

    from adaptrack_lsp.apis.jedi_index import find_python
    from adaptrack_lsp.apis.snapshot import write_snapshot

    if args.max_depth < 1:
        print("adaptrack-lsp index: --max-depth must be at least 1", file=sys.stderr)
        return 2
    if (args.package is None) == (args.requirement is None):
        print("adaptrack-lsp index: give --package NAME (an installed package) or --requirement SPEC (one of them)", file=sys.stderr)
        return 2
    if args.requirement is not None:
        if args.python is not None:
            print("adaptrack-lsp index: --requirement builds its own environment; --python is not used with it", file=sys.stderr)
            return 2
        code, data = _requirement_snapshot(args.requirement)
        if data is None:
            return code
    else:
        python, _, problem = find_python(args.python)
        if problem:
            print(f"adaptrack-lsp index: {problem}", file=sys.stderr)
            return 2
        try:
            data = walk_snapshot(python, args.package, args.max_depth, args.timeout)
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
        f"{data['package']} {data.get('version') or 'unknown'}: {len(data['names'])} names, "
        f"{len(data.get('signatures') or {})} signatures (max depth {args.max_depth}) -> {where}",
        file=sys.stderr,
    )
    return 0


def _requirement_snapshot(text: str):
    """(exit code, snapshot or None) of the release `text` names, built in its own
    environment (cached)."""
    import sys

    from adaptrack_lsp.apis.environments import EnvironmentBuildError, normalize_name
    from adaptrack_lsp.apis.targets import concrete_versions, parse_target, target_snapshot

    def say(line: str) -> None:
        print(f"adaptrack-lsp index: {line}", file=sys.stderr, flush=True)

    try:
        requirement = parse_target(text)
        versions = concrete_versions(requirement)
        version = versions[-1]
        if len(versions) > 1 or requirement.specifier and not str(requirement.specifier).startswith("=="):
            say(f"{text}: indexing its highest release with a wheel for this Python, {version}")
        data, path, seconds = target_snapshot(normalize_name(requirement.name), version, progress=say)
    except ValueError as error:
        say(str(error))
        return 2, None
    except (EnvironmentBuildError, RuntimeError) as error:
        say(str(error))
        return 1, None
    if not seconds:
        say(f"{data['package']} {data['version']}: read from the cache ({path})")
    return 0, data
