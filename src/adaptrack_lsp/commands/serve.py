"""`adaptrack-lsp serve` (placeholder until implemented)."""

HELP = "serve (not implemented yet)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise SystemExit("adaptrack-lsp serve is not implemented yet")
