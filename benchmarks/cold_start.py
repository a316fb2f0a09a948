"""The first completion in a new process: API index time and decode time, cold and warm.

Runs `adaptrack-lsp complete FILE --model tiny --json` (default settings otherwise, so a
3 s decode budget) as a fresh process on three files, a numpy, a torch and a TensorFlow
1-style one, first with an empty API index cache, then again with the cache the first
pass left.  The cache root is a new temporary folder; the built-in tiny model is linked
into it, so that only the API index starts empty.  The environment indexed is the one
running this script (it must have numpy, torch and tensorflow installed).

Per run it prints the index seconds (the time the API index spent computing or loading
answers in that process: interpreter probe, disk cache, jedi, runtime introspection; the
CLI waits for what the cursor needs before decoding), the decode seconds (the decoder's
wall time, which alone is bounded by the budget), the process seconds (model load
included), the status and the number of valid candidates.

    python benchmarks/cold_start.py [--samples 1]
    python benchmarks/cold_start.py --smoke   # the numpy file only (a run check)

Last line: ``cold_ok=N/3 warm_index_ms_tensorflow=... warm_index_ms_torch=...`` where
`cold_ok` counts the cold runs that returned at least one valid candidate (goal 3/3) and
the warm index figures are the second pass's index time (goal <= 300 ms for tensorflow).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = {
    "numpy": "import numpy as np\n\nvalues = np.arange(12).reshape(3, 4)\ntotal = np.",
    "torch": "import torch\nA = torch.eye(3)\nr = torch.matrix_",
    "tensorflow": (
        "import tensorflow as tf\n\nlabels = tf.constant([[1.0, 2.0]])\n"
        "predictions = tf.constant([[1.5, 2.5]])\nloss = tf.compat.v1."
    ),
}


def run_complete(file: Path, cache_root: Path, samples: int) -> dict:
    env = {**os.environ, "ADAPTRACK_CACHE": str(cache_root), "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "adaptrack_lsp", "complete", str(file), "--model", "tiny", "--json"]
    if samples > 1:
        command += ["--samples", str(samples)]
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=file.parent, timeout=900)
    process_s = time.perf_counter() - started
    if completed.returncode != 0:
        raise SystemExit(f"complete failed on {file.name} ({completed.returncode}): {completed.stderr[-2000:]}")
    answer = json.loads(completed.stdout)
    counters = answer["counters"]
    return {
        "index_s": counters.get("index_seconds", 0.0),
        "decode_s": counters.get("wall_seconds", 0.0),
        "process_s": process_s,
        "status": answer["status"],
        "valid": sum(1 for candidate in answer["candidates"] if candidate["valid"]),
        "problem": answer["constraint"].get("problem", ""),
        "packages": answer["constraint"].get("packages", {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=1, help="samples per completion (default 1: greedy, the default)")
    parser.add_argument("--smoke", action="store_true", help="the numpy file only (a run check)")
    args = parser.parse_args()
    chosen = {"numpy": FILES["numpy"]} if args.smoke else FILES

    from adaptrack_lsp.completion.lm.tiny import tiny_model_path

    tiny = tiny_model_path()  # built once in the user cache, linked into the empty roots
    work = Path(tempfile.mkdtemp(prefix="adaptrack-cold-start-"))
    try:
        cache_root = work / "cache"
        cache_root.mkdir()
        (cache_root / tiny.name).symlink_to(tiny, target_is_directory=True)
        files = {}
        for name, text in chosen.items():
            folder = work / name
            folder.mkdir()
            files[name] = folder / f"{name}_example.py"
            files[name].write_text(text, encoding="utf-8")
        results: dict[str, dict[str, dict]] = {"cold": {}, "warm": {}}
        print(f"{'pass':5} {'file':11} {'index_s':>8} {'decode_s':>8} {'process_s':>9}  status  valid")
        for phase in ("cold", "warm"):
            for name, file in files.items():
                result = run_complete(file, cache_root, args.samples)
                results[phase][name] = result
                note = f"  problem: {result['problem']}" if result["problem"] else ""
                print(
                    f"{phase:5} {name:11} {result['index_s']:8.3f} {result['decode_s']:8.3f} {result['process_s']:9.1f}"
                    f"  {result['status']:7} {result['valid']}{note}",
                    flush=True,
                )
        cold_ok = sum(1 for result in results["cold"].values() if result["valid"] > 0)
        warm = results["warm"]
        warm_ms = {name: f"{1000 * warm[name]['index_s']:.0f}" if name in warm else "nan" for name in FILES}
        print(
            f"cold_ok={cold_ok}/{len(chosen)} "
            f"warm_index_ms_tensorflow={warm_ms['tensorflow']} warm_index_ms_torch={warm_ms['torch']}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
