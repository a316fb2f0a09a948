"""Built artifacts under the cache root: a folder per recipe, built once.

`cached_build(name, build, marker)` builds folder `name` under `config.cache_root()` in a
temporary folder renamed into place under a file lock, so concurrent first uses build once
and never see a half-written folder.  `recipe_key` names a folder by a hash of everything
that shapes it (recipe, Python, tokenizers and, where seeded weights depend on it, torch).
Used by the models (tiny, builtin, GGUF exports) and the syntax constraint's parse table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from adaptrack_lsp.config import cache_root


def recipe_key(kind: str, recipe: dict, with_torch: bool) -> str:
    import tokenizers

    identity = {
        "kind": kind,
        "recipe": recipe,
        "python": list(sys.version_info[:2]),
        "tokenizers": tokenizers.__version__,
    }
    if with_torch:  # seeded initialisation may differ between torch releases
        import torch

        identity["torch"] = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    return f"{kind}-{digest}"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        try:
            import fcntl
        except ImportError:  # no POSIX locks: the atomic rename still keeps builds safe
            yield
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def cached_build(name: str, build: Callable[[Path], None], marker: str) -> Path:
    """Folder `name` under the cache root, built by `build(tmp_dir)` if absent.

    `marker` is a file `build` writes last; a folder without it is treated as absent.
    """
    root = cache_root()
    final = root / name
    if (final / marker).is_file():
        return final
    with file_lock(root / f".{name}.lock"):
        if (final / marker).is_file():
            return final
        temporary = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
        try:
            build(temporary)
            if not (temporary / marker).is_file():
                raise RuntimeError(f"building {name} did not produce {marker}")
            if final.exists():  # a stale, incomplete folder from an interrupted build
                shutil.rmtree(final)
            os.chmod(temporary, 0o755)
            os.rename(temporary, final)
        finally:
            if temporary.exists():
                shutil.rmtree(temporary, ignore_errors=True)
    return final
