"""Run `adaptrack-lsp ARGS...` with some top-level packages watched or made absent.

ADAPTRACK_TEST_WATCH: comma-separated top-level names; every import of one (the
interpreter's "import" audit event, raised only when a module is really loaded, not by
`importlib.util.find_spec`) is appended to the file ADAPTRACK_TEST_IMPORT_LOG at once (the
server may leave with os._exit).  With ADAPTRACK_TEST_ABSENT=1 those packages also behave
as not installed (imports and find_spec raise ModuleNotFoundError): the light core's
environment, in a process whose interpreter has them.
"""

from __future__ import annotations

import os
import sys

WATCHED = frozenset(name for name in os.environ.get("ADAPTRACK_TEST_WATCH", "").split(",") if name)
LOG = os.environ.get("ADAPTRACK_TEST_IMPORT_LOG", os.devnull)
ABSENT = os.environ.get("ADAPTRACK_TEST_ABSENT") == "1"


def _watched(name: str) -> bool:
    return name.partition(".")[0] in WATCHED


def _audit(event: str, args) -> None:
    if event == "import" and _watched(args[0]):
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write(f"{args[0]}\n")
        if ABSENT:
            raise ModuleNotFoundError(f"No module named {args[0]!r}", name=args[0])


class _Absent:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if _watched(name):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.addaudithook(_audit)
if ABSENT:
    sys.meta_path.insert(0, _Absent)

if __name__ == "__main__":
    from adaptrack_lsp.cli import main

    sys.exit(main(sys.argv[1:]))
