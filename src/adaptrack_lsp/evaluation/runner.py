"""The evaluation loop: items × decoders → results.jsonl, resumable, with a progress bar.

For API completion (TFv1, TFv1Real) each (item, decoder) pair gets one greedy decode
(EM@1) and `samples` independent sampled decodes at temperature 1 (EM@k, k > 1, by the
unbiased estimator), each a fresh request so that LM calls are counted per sample
(paper Table 5).  Generation stops where the API chain ends; the prediction is the
dotted chain and must equal the oracle exactly.  Every finished pair is appended to
``results.jsonl`` at once, so an interrupted run resumes where it stopped.

The model and the constraint come from providers (`ModelProvider`, `ConstraintProvider`)
so that the same loop serves real models, the tiny model and the simulated-intent LM.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
from adaptrack_lsp.evaluation.items import EvalItem, chain_ended, predicted_chain

log = logging.getLogger(__name__)

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"


class ModelProvider(Protocol):
    """Where the LM for an item comes from."""

    #: shown in reports (a simulation says so here)
    label: str
    simulated: bool

    def lm_for(self, item: EvalItem): ...

    def prompt_ids(self, item: EvalItem) -> list[int]: ...


class ConstraintProvider(Protocol):
    """The token-level constraint for an item, and whether it accepts the oracle."""

    source: str

    def token_constraint(self, item: EvalItem, lm): ...

    def accepts(self, item: EvalItem) -> bool: ...


@dataclass
class RunSettings:
    decoders: list[str]
    samples: int = 20
    seed: int = 0
    max_new_tokens: int = 64
    timeout_s: float | None = 60.0
    greedy: bool = True
    decoder_options: dict[str, dict[str, Any]] = field(default_factory=dict)


def sample_seed(seed: int, item_id: str, decoder: str, index: int) -> int:
    """A reproducible per-(item, decoder, sample) seed (stable across processes)."""
    digest = hashlib.sha256(f"{seed}|{item_id}|{decoder}|{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _one_decode(decoder, lm, constraint, prompt_ids, settings: RunSettings, temperature: float, seed: int, oracle: str):
    request = DecodeRequest(
        prompt_ids=prompt_ids,
        num_samples=1,
        temperature=temperature,
        max_new_tokens=settings.max_new_tokens,
        timeout_s=settings.timeout_s,
        seed=seed,
        stop=chain_ended,
    )
    started = time.perf_counter()
    result = decoder.decode(lm, constraint, request)
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    sample = result.samples[0] if result.samples else None
    text = sample.text if sample is not None else None
    prediction = predicted_chain(text) if text is not None else None
    return {
        "prediction": prediction,
        "text": text,
        "match": prediction is not None and prediction == oracle,
        "complete": bool(sample is not None and sample.complete),
        "valid": bool(sample is not None and sample.valid),
        "status": result.status,
        "lm_calls": int(result.counters.lm_calls),
        "tokens_fed": int(result.counters.tokens_fed),
        "backtracks": int(result.counters.backtracks),
        "latency_ms": elapsed_ms,
    }


def evaluate_item(
    item: EvalItem,
    decoder_name: str,
    model: ModelProvider,
    constraints: ConstraintProvider,
    settings: RunSettings,
    accepts_oracle: bool | None = None,
) -> dict[str, Any]:
    """One (item, decoder) record: the greedy decode and `settings.samples` sampled ones."""
    decoder = get_decoder(decoder_name, **settings.decoder_options.get(decoder_name, {}))
    lm = model.lm_for(item)
    prompt_ids = model.prompt_ids(item)
    constraint = constraints.token_constraint(item, lm)
    record: dict[str, Any] = {
        "item_id": item.item_id,
        "decoder": decoder_name,
        "oracle": item.oracle,
        "constraint_accepts_oracle": constraints.accepts(item) if accepts_oracle is None else accepts_oracle,
        "prompt_tokens": len(prompt_ids),
    }
    if settings.greedy:
        record["greedy"] = _one_decode(decoder, lm, constraint, prompt_ids, settings, 0.0, settings.seed, item.oracle)
    if decoder.exactness == "search":
        # a deterministic search ignores temperature and seed: one decode stands for all samples
        once = _one_decode(decoder, lm, constraint, prompt_ids, settings, 1.0, settings.seed, item.oracle) if settings.samples else None
        record["samples"] = [dict(once) for _ in range(settings.samples)]
        return record
    record["samples"] = [
        _one_decode(
            decoder, lm, constraint, prompt_ids, settings, 1.0, sample_seed(settings.seed, item.item_id, decoder_name, i), item.oracle
        )
        for i in range(settings.samples)
    ]
    return record


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a results.jsonl (a torn last line from an interrupted run is ignored)."""
    records = []
    if not path.exists():
        return records
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                log.warning("%s: ignoring the incomplete last line of an interrupted run", path)
                continue
            raise ValueError(f"{path}:{number}: not valid JSON") from None
    return records


def check_run_file(out_dir: Path, run_info: dict[str, Any]) -> None:
    """Write run.json, or check that a resumed run has the same configuration."""
    path = out_dir / RUN_FILE
    if path.exists():
        previous = json.loads(path.read_text(encoding="utf-8"))
        keys = [k for k in run_info if k not in ("decoders", "model_label")]
        changed = [k for k in keys if previous.get(k) != run_info.get(k)]
        if changed:
            raise ValueError(
                f"{out_dir} holds results of a different run (changed: {', '.join(changed)}); "
                "choose another --out folder"
            )
        merged = dict(previous)
        merged["decoders"] = sorted(set(previous.get("decoders", [])) | set(run_info.get("decoders", [])))
        path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(run_info, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def append_results(
    results_path: Path,
    jobs: Sequence[Any],
    evaluate: Callable[[Any], dict[str, Any]],
    *,
    desc: str,
    progress: bool = True,
    describe: Callable[[Any], str] | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Evaluate each job and append its record to results.jsonl at once (flushed, so an
    interrupted run keeps every finished record), with an optional tqdm progress bar."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc=desc, unit="pair", dynamic_ncols=True)
    try:
        with open(results_path, "a", encoding="utf-8") as handle:
            for job in jobs:
                record = evaluate(job)
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                handle.flush()
                if on_record is not None:
                    on_record(record)
                if bar is not None:
                    if describe is not None:
                        bar.set_postfix_str(describe(job))
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()


def run_api_evaluation(
    items: Sequence[EvalItem],
    model: ModelProvider,
    constraints: ConstraintProvider,
    settings: RunSettings,
    out_dir: str | Path,
    run_info: dict[str, Any],
    progress: bool = True,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every (item, decoder) pair not yet in ``out_dir/results.jsonl``.

    Returns all records of the current items and decoders (old and new).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    check_run_file(out_dir, run_info)
    results_path = out_dir / RESULTS_FILE
    existing = read_results(results_path)
    done = {(r["item_id"], r["decoder"]) for r in existing}
    todo = [(item, d) for item in items for d in settings.decoders if (item.item_id, d) not in done]
    if done:
        log.info("resuming: %d (item, decoder) pairs done, %d to go", len(done), len(todo))
    accepts_cache: dict[str, bool] = {}

    def evaluate(pair: tuple[EvalItem, str]) -> dict[str, Any]:
        item, decoder_name = pair
        if item.item_id not in accepts_cache:
            accepts_cache[item.item_id] = bool(constraints.accepts(item))
        return evaluate_item(item, decoder_name, model, constraints, settings, accepts_cache[item.item_id])

    append_results(
        results_path,
        todo,
        evaluate,
        desc="eval",
        progress=progress,
        describe=lambda pair: f"{pair[1]} {pair[0].item_id[:40]}",
        on_record=on_record,
    )
    wanted_items = {item.item_id for item in items}
    wanted_decoders = set(settings.decoders)
    return [
        r
        for r in read_results(results_path)
        if r["item_id"] in wanted_items and r["decoder"] in wanted_decoders
    ]


def records_by_decoder(records: Iterable[dict[str, Any]], decoders: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {d: [] for d in decoders}
    for record in records:
        if record["decoder"] in grouped:
            grouped[record["decoder"]].append(record)
    return grouped
