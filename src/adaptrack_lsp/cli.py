"""Command-line entry points (`adaptrack-lsp ...`) and logging setup.

Each subcommand lives in `adaptrack_lsp/commands/<name>.py` with `HELP`,
`add_arguments(parser)` and `run(args) -> int`.  Those modules import nothing heavy at
module level, so `adaptrack-lsp --help` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from adaptrack_lsp import __version__

SUBCOMMANDS = ["serve", "complete", "explain", "check", "sample", "index", "eval", "export-gguf", "settings-schema", "doctor"]


def setup_logging(verbose: int = 0, log_file: str | None = None) -> None:
    level = logging.WARNING - 10 * min(verbose, 2)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adaptrack-lsp",
        description="Version-correct AI code completions: language server, one-shot completion, evaluation.",
    )
    parser.add_argument("--version", action="version", version=f"adaptrack-lsp {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"adaptrack_lsp.commands.{name.replace('-', '_')}")
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        sub.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
        sub.add_argument("--log-file", default=None, help="also write the log to this file")
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    setup_logging(args.verbose, args.log_file)
    try:
        code = int(args._module.run(args) or 0)
        if not sys.stdout.closed:  # `serve` closes stdio when the client goes
            sys.stdout.flush()
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`... | head`): no traceback; stdout is pointed at
        # /dev/null so that the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
