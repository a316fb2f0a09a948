"""`adaptrack-lsp eval` (placeholder until implemented)."""

HELP = "eval (not implemented yet)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise SystemExit("adaptrack-lsp eval is not implemented yet")
