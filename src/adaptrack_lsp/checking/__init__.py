"""Checking the code a user already has: the checker (`checker.py`), its output formats
(`formats.py`) and the files it reads (`files.py`); `check` on the command line, and
diagnostics and quick fixes in the editor, use it."""
