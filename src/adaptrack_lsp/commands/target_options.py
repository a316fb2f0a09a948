"""The version-target flags shared by `complete`, `explain` and `serve`: ``--target SPEC``
(repeatable) and ``--target-from FILE`` (a pyproject.toml, optionally with
``[group,...]`` for optional-dependency groups, or a requirements file), turned into
the setting ``versionTargets`` (see `apis/targets.py`)."""

from __future__ import annotations

import sys


def add_target_arguments(parser) -> None:
    parser.add_argument(
        "--target",
        action="append",
        default=None,
        metavar="SPEC",
        help="a version range the code must also be valid in, e.g. 'numpy>=1.24,<3' (repeatable; setting versionTargets)",
    )
    parser.add_argument(
        "--target-from",
        action="append",
        default=None,
        metavar="FILE",
        help="read version targets from pyproject.toml ([project] dependencies; pyproject.toml[test] adds that "
        "optional group) or a requirements file",
    )


def target_settings(args, command: str) -> dict:
    """``{"versionTargets": [...]}`` from the flags ({} when none is given); what a file
    declares that is not a version range is named on stderr.  ValueError for a file
    that cannot be read, or one that declares no target."""
    from adaptrack_lsp.apis.targets import targets_from_file

    targets = list(getattr(args, "target", None) or [])
    for path in getattr(args, "target_from", None) or []:
        declared = targets_from_file(path)
        for skipped in declared.skipped:
            print(f"adaptrack-lsp {command}: --target-from: skipped {skipped}", file=sys.stderr)
        if not declared.targets:
            raise ValueError(f"--target-from {path}: no version requirement found")
        targets.extend(declared.targets)
    return {"versionTargets": targets} if targets else {}


def target_printer(command: str):
    """A progress callback printing each step of preparing the targets on stderr."""

    def say(line: str) -> None:
        print(f"adaptrack-lsp {command}: {line}", file=sys.stderr, flush=True)

    return say
