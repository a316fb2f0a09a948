"""The optional parts of the install (pip extras): what each adds, the modules it needs,
whether they are here, and the one message that names the command adding a missing one.

The core (`pip install adaptrack-lsp`) serves the built-in model, the API / keyword /
syntax constraints and the `server` backend without torch or transformers.  Everything
else is an extra; `pyproject.toml`'s `[project.optional-dependencies]` and `EXTRAS` name
the same packages (a test checks), and `doctor` lists them.  Presence is found with
`importlib.util.find_spec`, which imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    name: str
    #: what it adds, for messages and `doctor`
    purpose: str
    #: distribution name -> the module it installs (what find_spec looks for)
    packages: dict[str, str]


EXTRAS: dict[str, Extra] = {
    extra.name: extra
    for extra in (
        Extra(
            "transformers",
            "Hugging Face models (hub ids, model folders), `tiny` and the static KV cache",
            {"torch": "torch", "transformers": "transformers"},
        ),
        Extra("llamacpp", "GGUF models in process on llama.cpp, `export-gguf`", {"llama-cpp-python": "llama_cpp", "gguf": "gguf"}),
        Extra("grammar", "grammar constraints (Lark grammars, regular expressions, JSON schemas)", {"llguidance": "llguidance", "lark": "lark"}),
        Extra("eval", "`eval`'s plots and `sample`'s chi-square test", {"matplotlib": "matplotlib", "scipy": "scipy"}),
    )
}


class MissingExtra(ImportError):
    """A part of the install that a request needs is not installed; the message names the
    command that installs it."""

    def __init__(self, message: str, extra: str):
        super().__init__(message)
        self.extra = extra


def present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken __spec__
        return False


def missing_packages(extra: str, only: tuple[str, ...] = ()) -> list[str]:
    """The distributions of `extra` (or just those named in `only`) whose module is absent."""
    packages = EXTRAS[extra].packages
    return [dist for dist, module in packages.items() if (not only or dist in only) and not present(module)]


def install_command(extra: str, python: str | None = None) -> str:
    """The command that adds `extra` to the interpreter running this (pip keeps the
    installed adaptrack-lsp and adds the extra's packages)."""
    python = python or sys.executable or "python3"
    return f"{shlex.quote(python)} -m pip install 'adaptrack-lsp[{extra}]'"


def missing_message(extra: str, what: str, packages: list[str]) -> str:
    return f"{what} needs the {extra} extra ({', '.join(packages)} not installed): {install_command(extra)}"


def require(extra: str, what: str, only: tuple[str, ...] = ()) -> None:
    """Raise `MissingExtra` (one line naming the install command) unless the packages of
    `extra` (or those named in `only`) are installed; `what` says what needs them
    (``"model 'Qwen/Qwen2.5-Coder-1.5B'"``)."""
    missing = missing_packages(extra, only)
    if missing:
        raise MissingExtra(missing_message(extra, what, missing), extra)


def installed() -> dict[str, list[str]]:
    """extra -> its missing distributions ([] when the extra is complete)."""
    return {name: missing_packages(name) for name in EXTRAS}
