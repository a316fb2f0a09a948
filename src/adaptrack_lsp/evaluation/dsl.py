"""DSL / exactness evaluation (paper §6.4): how close each decoder's samples are to P(s|c).

Tasks are the engine's task files (`evaluation/tasks.py`: a tabular LM, a finite set of
valid sequences, and the exact P(s|c) by enumeration), or their LMs under a grammar
(`evaluation/grammar_tasks.py`, ``--grammar``); the default is the paper's binary
task (5 random bits; valid: 00000 or a leading 1; P(00000|c) = 1/17).  Per task and
decoder, one request draws `samples` sequences in order (AdapTrack and ASAp share their
estimates across the samples of a request, as in the paper), and we report the KL
divergence of the empirical distribution to the exact P(s|c) and the sliding-window KL
curve (window = a quarter of the samples, paper Figure 4).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.evaluation.metrics import kl_divergence, sliding_window_kl
from adaptrack_lsp.evaluation.runner import RESULTS_FILE, append_results, check_run_file, read_results
from adaptrack_lsp.evaluation.tasks import Task, binary_task, load_task

DEFAULT_DSL_DECODERS = ("constrained", "asap", "adaptrack")


def load_tasks(source: str | Path | None, grammar=None, max_length: int | None = None) -> list[Task]:
    """The binary task (None), every ``*.json`` task in a folder (sorted), or one task file.

    With `grammar` (a `GrammarSpec`) each task's LM is constrained by the grammar alone
    (`grammar_tasks.bind_grammar`; task files may then leave out `valid`), and the exact
    P(s|c) comes from enumeration up to `max_length` tokens."""
    if source is None:
        tasks = [binary_task()]
    else:
        path = Path(source)
        if path.is_dir():
            files = sorted(path.glob("*.json"))
            if not files:
                raise ValueError(f"{path} holds no *.json task files")
        elif path.is_file():
            files = [path]
        else:
            raise ValueError(f"DSL data {path} is neither a task file nor a folder of task files")
        tasks = [load_task(f, require_valid=grammar is None) for f in files]
    if grammar is None:
        return tasks
    from adaptrack_lsp.evaluation.grammar_tasks import DEFAULT_GRAMMAR_CAP, bind_grammar

    return [bind_grammar(task, grammar, max_length or DEFAULT_GRAMMAR_CAP) for task in tasks]


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def evaluate_task(task: Task, decoder_name: str, samples: int, seed: int, timeout_s: float | None = None) -> dict[str, Any]:
    """Draw `samples` sequences from one decoder on `task`; KL and the sliding curve."""
    exact = task.exact_distribution()
    if not exact:
        raise ValueError(f"task {task.name}: no valid sequence has positive probability")
    decoder = get_decoder(decoder_name)
    request = DecodeRequest(
        prompt_ids=[],
        num_samples=samples,
        temperature=1.0,
        max_new_tokens=max(1, task.max_length),
        timeout_s=timeout_s,
        seed=seed,
        options={"share_estimates": True},
    )
    started = time.perf_counter()
    result = decoder.decode(task.language_model(), task.constraint(), request)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    sequences = [tuple(s.token_ids) for s in result.samples if s.complete]
    invalid = sum(1 for s in sequences if exact.get(s, 0.0) <= 0.0)
    kl = kl_divergence(sequences, exact) if sequences else math.inf
    curve = sliding_window_kl(sequences, exact) if sequences else []
    counts: dict[str, int] = {}
    for s in sequences:
        key = task.format(s)
        counts[key] = counts.get(key, 0) + 1
    return {
        "task": task.name,
        "decoder": decoder_name,
        "samples_requested": samples,
        "samples": [task.format(s) for s in sequences],
        "counts": counts,
        "exact": {task.format(s): p for s, p in sorted(exact.items(), key=lambda kv: -kv[1])},
        "kl": _finite(kl),
        "kl_is_infinite": not math.isfinite(kl),
        "invalid_samples": invalid,
        "failed_samples": samples - len(sequences),
        "kl_curve": [_finite(v) for v in curve],
        "kl_window": max(1, len(sequences) // 4),
        "lm_calls": int(result.counters.lm_calls),
        "backtracks": int(result.counters.backtracks),
        "status": result.status,
        "latency_ms": elapsed_ms,
    }


def run_dsl_evaluation(
    tasks: Sequence[Task],
    decoders: Sequence[str],
    samples: int,
    seed: int,
    out_dir: str | Path,
    run_info: dict[str, Any],
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Evaluate every (task, decoder) pair not yet in results.jsonl; returns all records."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_run_file(out_dir, run_info)
    results_path = out_dir / RESULTS_FILE
    done = {(r["task"], r["decoder"]) for r in read_results(results_path)}
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise ValueError(f"task names must be distinct, got {names}")
    todo = [(t, d) for t in tasks for d in decoders if (t.name, d) not in done]
    append_results(
        results_path,
        todo,
        lambda pair: evaluate_task(pair[0], pair[1], samples, seed),
        desc="eval dsl",
        progress=progress,
    )
    wanted = set(names)
    return [r for r in read_results(results_path) if r["task"] in wanted and r["decoder"] in set(decoders)]


def summarize_dsl(records: Sequence[dict[str, Any]], decoders: Sequence[str], tasks: Sequence[str]) -> dict[str, Any]:
    """Per decoder: KL per task, average over tasks (inf if any is inf), LM calls, failures."""
    summary: dict[str, Any] = {}
    for decoder in decoders:
        mine = {r["task"]: r for r in records if r["decoder"] == decoder}
        kl = {t: (mine[t]["kl"] if t in mine else None) for t in tasks}
        infinite = any(mine[t]["kl_is_infinite"] for t in tasks if t in mine)
        finite = [v for v in kl.values() if v is not None]
        summary[decoder] = {
            "kl": kl,
            "kl_average": None if infinite or len(finite) != len(tasks) else sum(finite) / len(finite),
            "kl_infinite_tasks": [t for t in tasks if t in mine and mine[t]["kl_is_infinite"]],
            "lm_calls_total": int(sum(r["lm_calls"] for r in mine.values())),
            "failed_samples": int(sum(r["failed_samples"] for r in mine.values())),
            "latency_ms_mean": float(sum(r["latency_ms"] for r in mine.values()) / max(1, len(mine))),
        }
    return summary
