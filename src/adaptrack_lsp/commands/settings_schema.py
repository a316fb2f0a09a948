"""`adaptrack-lsp settings-schema`: print the server settings as JSON Schema.

The one machine-readable description of the settings (names on the wire, types,
defaults, allowed values), generated from `adaptrack_lsp.config.Settings`; the VS Code
contributions, the VS Code and Neovim clients' defaults and the README table are checked
against it by the test suite.
"""

from __future__ import annotations

HELP = "print the server settings (names, types, defaults, allowed values) as JSON Schema"


def add_arguments(parser) -> None:
    parser.add_argument("--indent", type=int, default=2, help="JSON indentation (default 2)")


def run(args) -> int:
    import json

    from adaptrack_lsp.config import settings_schema

    print(json.dumps(settings_schema(), indent=args.indent))
    return 0
