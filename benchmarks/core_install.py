"""The light core as a user installs it: its size, its packages, and its cold start to the
first ghost text.

A full run builds this tree's wheel, installs it with pip into a fresh virtual environment
(dependencies from the package index, as `pip install adaptrack-lsp` does), and measures:

- ``core_mb``: the environment's site-packages, every file, dependencies included, less
  the virtual environment's own pip and setuptools (not the core's dependencies; pipx and
  `uv tool install` environments have none); ``site_packages_mb`` is the whole folder and
  ``no_bytecode_mb`` the core without ``__pycache__`` (what `uv tool install` writes: uv
  compiles no bytecode by default);
- ``core_packages``: the distributions installed besides pip and setuptools (the core
  itself included), and that none of torch, transformers, llama-cpp-python, llguidance,
  matplotlib and scipy is among them;
- ``first_ghost_s``: from starting `adaptrack-lsp serve` (the environment's interpreter)
  to the first non-empty ghost text after ``np.`` in a new document: process start,
  initialize, the built-in model loaded from the cache, the API index, the decode.  The
  model is built into the cache first, by the environment itself (a new environment
  whose numpy or tokenizers differ from an earlier one's builds its own: one to two
  minutes, once, reported apart as ``build_s``).  The first start in a new environment
  also computes the API index of numpy for it (kept on disk): ``first_ghost_s`` is that
  start, ``later_ghost_s`` the median of the starts after it.

``--smoke`` installs nothing: the same figures for the current interpreter's core closure
(the distributions adaptrack-lsp requires, recursively, without extras, summed from their
RECORD files; bytecode as found) and one start of the current interpreter.

    python benchmarks/core_install.py            # minutes: a venv, pip from the index
    python benchmarks/core_install.py --smoke

Last line: ``core_mb=... core_packages=... heavy=0 first_ghost_s=... later_ghost_s=...`` (goal: core_mb <= 150).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsp_latency import StdioPeer

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "llama-cpp-python", "llama_cpp_python", "llguidance", "matplotlib", "scipy")
#: the virtual environment's own tools, not dependencies of the core
SEED = ("pip", "setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth", "wheel")
TEXT = "import numpy as np\n\nvalues = np."


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def folder_mb(path: Path, skip_bytecode: bool = False) -> float:
    total = 0
    for root, dirs, files in os.walk(path):
        if skip_bytecode and "__pycache__" in dirs:
            dirs.remove("__pycache__")
        for name in files:
            file = Path(root) / name
            if not file.is_symlink():
                total += file.stat().st_size
    return total / 1e6


def venv_figures(site: Path) -> dict:
    seed = [item for item in site.iterdir() if item.name.split("-")[0] in SEED or item.name in SEED]
    whole = folder_mb(site)
    seed_mb = sum(folder_mb(item) if item.is_dir() else item.stat().st_size / 1e6 for item in seed)
    seed_nobc = sum(folder_mb(item, True) if item.is_dir() else item.stat().st_size / 1e6 for item in seed)
    dists = [item.name.split("-")[0] for item in site.glob("*.dist-info")]
    core = [name for name in dists if _normal(name) not in SEED]
    return {
        "site_packages_mb": whole,
        "core_mb": whole - seed_mb,
        "no_bytecode_mb": folder_mb(site, True) - seed_nobc,
        "packages": sorted(core),
    }


def closure_figures() -> dict:
    """The current interpreter's core closure, from installed metadata."""
    from importlib.metadata import PackageNotFoundError, distribution

    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    env = default_environment()
    seen: dict[str, object] = {}
    todo = ["adaptrack-lsp"]
    while todo:
        name = _normal(todo.pop())
        if name in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            continue
        seen[name] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({**env, "extra": ""}):
                todo.append(requirement.name)
    total = bytecode = 0
    for dist in seen.values():
        for file in dist.files or []:
            path = Path(dist.locate_file(file))
            if path.is_file():
                size = path.stat().st_size
                total += size
                bytecode += size if "__pycache__" in path.parts else 0
    return {"site_packages_mb": total / 1e6, "core_mb": total / 1e6, "no_bytecode_mb": (total - bytecode) / 1e6, "packages": sorted(seen)}


def first_ghost(python: str, env: dict[str, str], work: Path) -> float:
    """Seconds from starting `serve` to the first non-empty ghost text."""
    uri = (work / "first.py").as_uri()
    started = time.perf_counter()
    peer = StdioPeer([python, "-m", "adaptrack_lsp", "serve"], env)
    try:
        peer.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {},
                                    "initializationOptions": {"model": "builtin", "maxNewTokens": 16}})
        peer.notify("initialized", {})
        peer.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}})
        params = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": len("values = np.")}, "context": {"triggerKind": 2}}
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            _, response = peer.request("textDocument/inlineCompletion", params)
            items = (response.get("result") or {}).get("items") or []
            if items and items[0].get("insertText"):
                return time.perf_counter() - started
            time.sleep(0.05)  # the model is loading or the index is computing: ask again, as an editor does
        raise TimeoutError("no ghost text within 300 s")
    finally:
        peer.close()


def build_wheel(out: Path) -> Path:
    tree = out / "tree"  # a copy: building writes egg-info beside the sources
    tree.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "src" / "adaptrack_lsp", tree / "src" / "adaptrack_lsp", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(tree)], check=True)
    return next(out.glob("adaptrack_lsp-*.whl"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="no install: the current interpreter's closure, one start")
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="adaptrack-core-install-"))
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"})
    try:
        if args.smoke:
            python, figures, build_s, starts = sys.executable, closure_figures(), 0.0, 1
            env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        else:
            wheel = build_wheel(work / "wheel")
            venv = work / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            python = str(venv / "bin" / "python")
            began = time.perf_counter()
            subprocess.run([python, "-m", "pip", "install", "-q", str(wheel)], check=True)
            print(f"pip install {wheel.name}: {time.perf_counter() - began:.0f} s")
            site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                       capture_output=True, text=True, check=True).stdout.strip())
            figures = venv_figures(site)
            began = time.perf_counter()
            subprocess.run([python, "-c", "from adaptrack_lsp.completion.lm.builtin import load_builtin_model as l; l(show_bar=False)"],
                           check=True, env=env)
            build_s, starts = time.perf_counter() - began, args.starts
        heavy = [name for name in figures["packages"] if _normal(name) in {_normal(h) for h in HEAVY}]
        print(f"site-packages {figures['site_packages_mb']:.0f} MB; the core less the venv's pip/setuptools "
              f"{figures['core_mb']:.0f} MB ({figures['no_bytecode_mb']:.0f} MB without bytecode), {len(figures['packages'])} distributions")
        print("distributions: " + " ".join(figures["packages"]))
        print(f"heavy packages installed: {heavy or 'none'}; built-in model ready in {build_s:.1f} s")
        times = []
        for start in range(starts):
            times.append(first_ghost(python, env, work))
            print(f"start {start + 1}: first ghost text after {times[-1]:.2f} s", flush=True)
        print(json.dumps({"first_ghost_s": times}))
        later = statistics.median(times[1:]) if len(times) > 1 else float("nan")
        print(f"core_mb={figures['core_mb']:.0f} core_packages={len(figures['packages'])} heavy={len(heavy)} "
              f"first_ghost_s={times[0]:.2f} later_ghost_s={later:.2f} no_bytecode_mb={figures['no_bytecode_mb']:.0f} build_s={build_s:.0f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
