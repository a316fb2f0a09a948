"""`adaptrack-lsp index` (placeholder until implemented)."""

HELP = "index (not implemented yet)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise SystemExit("adaptrack-lsp index is not implemented yet")
