"""A language server process whose model is the exact tabular model of the quick-fix
tests and whose API index is their snapshot of ``mylib`` (`tests/unit/fix_support.py`),
run as a script by `test_code_actions.py`: the real server, protocol and pipeline."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))


def main() -> int:
    from fix_support import fix_model, snapshot_index

    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.lsp_server.server import create_server

    index = snapshot_index()

    def service(settings, **kwargs):
        return CompletionService(
            settings, model_loader=lambda s, progress: fix_model(), index_factory=lambda s, root: index, **kwargs
        )

    server = create_server(service_factory=service)
    server.start_io()
    return server.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
