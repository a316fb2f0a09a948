"""The version-target flags shared by `complete`, `explain` and `serve`: ``--target SPEC``
(repeatable) and ``--target-from FILE`` (a pyproject.toml, optionally with
``[group,...]`` for optional-dependency groups, or a requirements file), turned into
the setting ``versionTargets`` (see `apis/targets.py`)."""

from __future__ import annotations

import sys


def add_target_arguments(parser, strict: bool = True) -> None:
    """``--target``, ``--target-from`` and (`strict`) ``--strict-targets``."""
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
    if not strict:
        return
    parser.add_argument(
        "--strict-targets",
        action="store_true",
        help="a version target that cannot be built is an error (exit 3); by default its package is unchecked "
        "under that target, said on stderr, and the other targets are checked",
    )


def target_settings(args, command: str) -> dict:
    """``{"versionTargets": [...]}`` from the flags ({} when none is given); what a file
    declares that is not a version range is named on stderr.  ValueError for a file
    that cannot be read, or one that declares no target."""
    from adaptrack_lsp.apis.targets import python_note, targets_from_file

    targets = list(getattr(args, "target", None) or [])
    for path in getattr(args, "target_from", None) or []:
        declared = targets_from_file(path)
        for skipped in declared.skipped:
            print(f"adaptrack-lsp {command}: --target-from: skipped {skipped}", file=sys.stderr)
        if not declared.targets:
            raise ValueError(f"--target-from {path}: no version requirement found")
        note = python_note(declared.requires_python, checking_python_version(getattr(args, "python", None)))
        if note:
            print(f"adaptrack-lsp {command}: --target-from {path}: {note}", file=sys.stderr)
        targets.extend(declared.targets)
    return {"versionTargets": targets} if targets else {}


def checking_python_version(python: str | None) -> str:
    """``"3.11"``: the version of the interpreter that checks (``--python``, else this one)."""
    if python:
        try:
            from adaptrack_lsp.apis.environments import python_identity

            return python_identity(python).split("-")[1]
        except Exception:  # noqa: BLE001 - an interpreter that does not run is reported elsewhere
            pass
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def strict_targets(args) -> bool:
    """Whether ``--strict-targets`` was given."""
    return bool(getattr(args, "strict_targets", False))


def target_printer(command: str):
    """A progress callback printing each step of preparing the targets on stderr."""

    def say(line: str) -> None:
        print(f"adaptrack-lsp {command}: {line}", file=sys.stderr, flush=True)

    return say
