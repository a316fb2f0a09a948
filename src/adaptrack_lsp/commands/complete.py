"""`adaptrack-lsp complete` (placeholder until implemented)."""

HELP = "complete (not implemented yet)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise SystemExit("adaptrack-lsp complete is not implemented yet")
