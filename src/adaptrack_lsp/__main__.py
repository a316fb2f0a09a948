"""`python -m adaptrack_lsp`: the command line, never importing from the working directory.

`python -m` puts the working directory first on `sys.path`; an editor that starts the
server inside a project would let the project's ``queue.py`` or ``token.py`` replace the
standard library's.  The clients start the server in a neutral directory; this module
is the second guard: it removes the working directory from `sys.path` before anything
else is imported, and refuses to start when a module was already imported from it.
Only `sys` and `os` (loaded before `sys.path` gets the working directory) are used here.
"""

import os
import sys


def _drop_working_directory() -> str | None:
    """Remove ''/'.'/the working directory from sys.path; the name of a module already
    imported from it, if any."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the working directory was deleted
        cwd = None

    def is_cwd(entry: str) -> bool:
        return entry in ("", ".") or (cwd is not None and os.path.realpath(entry) == cwd)

    sys.path[:] = [entry for entry in sys.path if not is_cwd(entry)]
    if cwd is None:
        return None
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and os.path.dirname(os.path.realpath(file)) == cwd:
            return name
    return None


_shadowing = _drop_working_directory()
if _shadowing is not None:
    sys.stderr.write(
        f"adaptrack-lsp: the module {_shadowing!r} was imported from the working directory "
        f"{os.getcwd()} before the server started; refusing to run. Start it from another "
        "directory, or with `python -P -m adaptrack_lsp` (Python 3.11+).\n"
    )
    raise SystemExit(2)

from adaptrack_lsp.cli import main  # noqa: E402  (after the guard, on purpose)

raise SystemExit(main())
