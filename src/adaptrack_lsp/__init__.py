"""adaptrack-lsp: version-correct AI code completions decoded exactly under API constraints."""

__version__ = "0.1.0"
