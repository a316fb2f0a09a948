"""`adaptrack-lsp sample` (placeholder until implemented)."""

HELP = "sample (not implemented yet)"


def add_arguments(parser) -> None:
    pass


def run(args) -> int:
    raise SystemExit("adaptrack-lsp sample is not implemented yet")
