"""`adaptrack-lsp eval` orchestration: datasets, providers, runs, summaries, tables and plots.

Output folder layout (``--out DIR``):

- tfv1 with one setting, tfv1real, dsl: ``DIR/results.jsonl``, ``DIR/summary.json``,
  ``DIR/table.md``, ``DIR/run.json`` and the plots;
- gitchameleon: ``DIR/records.jsonl``, ``DIR/pairs.jsonl``, ``DIR/environments.json``,
  ``DIR/runs.jsonl`` (executions, reused by a rerun), ``DIR/summary.json``,
  ``DIR/table.md``, and with ``--model`` ``DIR/generations.jsonl``;
- tfv1 ``--setting both``: the per-setting files in ``DIR/v1/`` and ``DIR/v2/`` and a
  combined ``DIR/summary.json``, ``DIR/table.md`` (paper Table 1 shape) and
  ``DIR/em_at_k.png``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from adaptrack_lsp.evaluation import report
from adaptrack_lsp.evaluation.items import write_items_jsonl
from adaptrack_lsp.evaluation.metrics import DEFAULT_KS
from adaptrack_lsp.evaluation.runner import RunSettings, run_api_evaluation

log = logging.getLogger(__name__)

SETTING_TITLES = {"v1": "TensorFlow v1 setting", "v2": "TensorFlow v2 setting"}
#: token limit per completion of tfv1 / tfv1real (--max-new-tokens)
DEFAULT_MAX_NEW_TOKENS = 64


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_decoder_options(options: list[str], decoders: list[str]) -> dict[str, dict[str, Any]]:
    """``["adaptrack.max_backtrack_distance=4"]`` -> ``{"adaptrack": {"max_backtrack_distance": 4}}``."""
    parsed: dict[str, dict[str, Any]] = {}
    for option in options:
        head, sep, value = option.partition("=")
        decoder, dot, key = head.partition(".")
        if not sep or not dot or not decoder or not key:
            raise ValueError(f"--option {option!r}: expected DECODER.KEY=VALUE")
        if decoder not in decoders:
            raise ValueError(f"--option {option!r}: decoder {decoder!r} is not among --decoders ({', '.join(decoders)})")
        parsed.setdefault(decoder, {})[key] = _parse_value(value)
    return parsed


def parse_decoders(text: str) -> list[str]:
    from adaptrack_lsp.completion.decoders import decoder_names

    decoders = [d.strip() for d in text.split(",") if d.strip()]
    if not decoders:
        raise ValueError("--decoders names no decoder")
    unknown = [d for d in decoders if d not in decoder_names()]
    if unknown:
        raise ValueError(f"unknown decoder(s) {', '.join(unknown)}; choose from: {', '.join(decoder_names())}")
    if len(set(decoders)) != len(decoders):
        raise ValueError("--decoders lists a decoder twice")
    return decoders


def run_eval(args) -> int:
    from adaptrack_lsp.constrainers.grammar import GrammarLimitError

    try:
        if args.dataset == "dsl":
            return _run_dsl(args)
        if args.dataset == "gitchameleon":
            return _run_gitchameleon(args)
        if args.max_new_tokens is None:
            args.max_new_tokens = DEFAULT_MAX_NEW_TOKENS
        return _run_api(args)
    except (ValueError, GrammarLimitError) as error:
        print(f"adaptrack-lsp eval: {error}", file=sys.stderr)
        return 2


# -- TFv1 / TFv1Real ------------------------------------------------------------------------
def _run_api(args) -> int:
    from adaptrack_lsp.evaluation.constraints import (
        APIConstraintProvider,
        load_api_snapshot,
        setting_index,
    )
    from adaptrack_lsp.evaluation.models import load_provider
    from adaptrack_lsp.evaluation.tfv1 import build_tfv1
    from adaptrack_lsp.evaluation.tfv1real import load_or_build

    if not args.model:
        raise ValueError(f"eval {args.dataset} needs --model (simulated, tiny, a model folder or a hub id)")
    decoders = parse_decoders(args.decoders or "unconstrained,constrained,adaptrack")
    samples = 20 if args.samples is None else int(args.samples)
    if samples < 0:
        raise ValueError("--samples must be >= 0")
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    settings = RunSettings(
        decoders=decoders,
        samples=samples,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        timeout_s=args.timeout if args.timeout and args.timeout > 0 else None,
        decoder_options=parse_decoder_options(args.option, decoders),
    )
    from adaptrack_lsp.completion.decoders import get_decoder

    for name, options in settings.decoder_options.items():
        get_decoder(name, **options)  # a bad option stops here, naming the decoder and option
    ks = [k for k in DEFAULT_KS if k == 1 or k <= samples]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    api = load_api_snapshot(args.api_snapshot, args.python)
    model = load_provider(args.model, device=args.device, dtype=args.dtype)
    progress = not args.no_progress

    if args.dataset == "tfv1":
        chosen = ["v1", "v2"] if args.setting == "both" else [args.setting]
        groups: dict[str, Any] = {}
        per_setting: dict[str, Any] = {}
        for setting in chosen:
            items = build_tfv1(api.names, setting, api.data.get("kinds"))
            total = len(items)
            print(f"TFv1: {total} TensorFlow-v1-only APIs from {api.source} (paper: 419 on TF 2.16)")
            if args.limit is not None:
                items = items[: args.limit]
            folder = out / setting if len(chosen) > 1 else out
            constraints = APIConstraintProvider(setting_index(api, setting), f"{api.source}, {setting} setting")
            info = _run_info(args, "tfv1", setting, model, api.source, decoders, samples)
            records = run_api_evaluation(items, model, constraints, settings, folder, info, progress=progress)
            summary = report.summarize_api(records, decoders, ks)
            extra = {"tfv1_api_count": total, "items": len(items), "setting": setting}
            _write_api_outputs(folder, "tfv1", {SETTING_TITLES[setting]: summary}, model, api.source, samples, extra, ks)
            groups[SETTING_TITLES[setting]] = summary
            per_setting[setting] = {**extra, "decoders": summary}
        if len(chosen) > 1:
            _write_api_outputs(out, "tfv1", groups, model, api.source, samples, {"settings": per_setting}, ks)
        print(f"wrote {out / 'table.md'}")
        print((out / "table.md").read_text(encoding="utf-8"))
        return 0

    # tfv1real: the real TF 2 environment (v2 setting)
    if args.data is None:
        raise ValueError("eval tfv1real needs --data (a folder of .py files or a JSONL of {prefix, oracle})")
    if args.setting not in ("both", "v2"):
        raise ValueError("TFv1Real is evaluated against the TF 2 API (v2 setting) only")
    items, build = load_or_build(args.data, count_tokens=model.count_tokens, max_prompt_tokens=args.max_prompt_tokens)
    if "built_from" in build:
        write_items_jsonl(items, out / "dataset.jsonl")
    print(f"TFv1Real: {len(items)} items ({json.dumps(build)})")
    if args.limit is not None:
        items = items[: args.limit]
    constraints = APIConstraintProvider(setting_index(api, "v2"), f"{api.source}, v2 setting")
    info = _run_info(args, "tfv1real", "v2", model, api.source, decoders, samples)
    records = run_api_evaluation(items, model, constraints, settings, out, info, progress=progress)
    summary = report.summarize_api(records, decoders, ks)
    _write_api_outputs(out, "tfv1real", {"TFv1Real": summary}, model, api.source, samples, {"items": len(items), "dataset_build": build}, ks)
    print((out / "table.md").read_text(encoding="utf-8"))
    return 0


def _run_info(args, dataset: str, setting: str, model, api_source: str, decoders, samples: int) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "setting": setting,
        "model": args.model,
        "model_label": model.label,
        "simulated": bool(getattr(model, "simulated", False)),
        "api_source": api_source,
        "samples": samples,
        "seed": args.seed,
        "max_new_tokens": args.max_new_tokens,
        "data": args.data,
        "decoders": list(decoders),
    }


def _write_api_outputs(folder: Path, dataset: str, groups, model, api_source: str, samples: int, extra, ks) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    simulated = bool(getattr(model, "simulated", False))
    model_label = model.label
    summary: dict[str, Any] = {
        "dataset": dataset,
        "model": model_label,
        "simulated": simulated,
        "api_source": api_source,
        "samples": samples,
        **extra,
    }
    if len(groups) == 1 and "settings" not in extra:
        summary["decoders"] = next(iter(groups.values()))
    report.write_json(folder / "summary.json", summary)
    title = {"tfv1": "Exact match on TFv1", "tfv1real": "Exact match on TFv1Real"}[dataset]
    (folder / "table.md").write_text(report.api_table(groups, title, model_label, ks), encoding="utf-8")
    short = "simulated-intent LM (simulation)" if simulated else model_label
    report.plot_em_at_k(groups, folder / "em_at_k.png", f"{title}: {short}")


# -- DSL ---------------------------------------------------------------------------------------
def _run_dsl(args) -> int:
    from adaptrack_lsp.evaluation.dsl import (
        load_tasks,
        run_dsl_evaluation,
        summarize_dsl,
    )

    if args.model not in (None, "task"):
        raise ValueError("eval dsl uses each task's own tabular LM; leave out --model")
    decoders = parse_decoders(args.decoders or "constrained,asap,adaptrack")
    samples = 100 if args.samples is None else int(args.samples)
    if samples < 1:
        raise ValueError("--samples must be >= 1")
    grammar = getattr(args, "grammar", None)
    if grammar is not None:
        from adaptrack_lsp.constrainers.grammar import GrammarSpec

        grammar = GrammarSpec.from_file(grammar)
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise ValueError("--max-new-tokens must be at least 1")
    tasks = load_tasks(args.data, grammar=grammar, max_length=args.max_new_tokens)
    if args.limit is not None:
        tasks = tasks[: args.limit]
    out = Path(args.out)
    info = {"dataset": "dsl", "data": args.data, "samples": samples, "seed": args.seed, "decoders": decoders}
    if grammar is not None:
        info["grammar"] = grammar.source
        info["length_cap"] = tasks[0].max_length if tasks else None
    records = run_dsl_evaluation(tasks, decoders, samples, args.seed, out, info, progress=not args.no_progress)
    names = [t.name for t in tasks]
    summary = summarize_dsl(records, decoders, names)
    model_label = "tabular task LMs (exact)"
    if grammar is not None:
        model_label += f", constraint: grammar {grammar.source} (P(s|c) enumerated up to {info['length_cap']} tokens)"
    report.write_json(out / "summary.json", {"dataset": "dsl", "model": model_label, "samples": samples, "tasks": names, "decoders": summary})
    (out / "table.md").write_text(report.dsl_table(summary, names, model_label), encoding="utf-8")
    curves = {t: {r["decoder"]: r["kl_curve"] for r in records if r["task"] == t} for t in names}
    report.plot_kl_curves(curves, out / "kl_curve.png", "Sliding-window KL divergence to P(s|c)")
    print((out / "table.md").read_text(encoding="utf-8"))
    return 0


# -- GitChameleon ---------------------------------------------------------------------------------
def _run_gitchameleon(args) -> int:
    from adaptrack_lsp.evaluation import gitchameleon

    if args.data is None:
        raise ValueError("eval gitchameleon needs --data DIR (the GitChameleon dataset folder: dataset.jsonl, hidden_tests/)")
    if args.limit is not None and args.limit < 1:
        raise ValueError("--limit must be >= 1")
    parts = _comma_list(args.constraints) if args.constraints else list(gitchameleon.DEFAULT_PARTS)
    from adaptrack_lsp.checking.explainer import PARTS

    unknown = [part for part in parts if part not in PARTS]
    if unknown:
        raise ValueError(f"--constraints: unknown part(s) {', '.join(unknown)} (known: {', '.join(PARTS)})")
    if args.run_timeout <= 0:
        raise ValueError("--run-timeout must be > 0")
    records = gitchameleon.load_records(args.data, _comma_list(args.libraries) if args.libraries else None, args.limit)
    if not records:
        raise ValueError(f"{args.data}: no records" + (f" of {args.libraries}" if args.libraries else ""))
    generation = None
    if args.model:
        decoders = parse_decoders(args.decoders or ",".join(gitchameleon.DEFAULT_DECODERS))
        samples = 5 if args.samples is None else int(args.samples)
        if samples < 0:
            raise ValueError("--samples must be >= 0")
        generation = gitchameleon.GenerationSettings(
            model=args.model, decoders=decoders, samples=samples, seed=args.seed,
            max_new_tokens=args.max_new_tokens or 128, timeout_s=args.timeout if args.timeout and args.timeout > 0 else 60.0,
            extra={k: v for k, v in {"device": args.device, "dtype": args.dtype}.items() if v is not None},
        )
    elif args.decoders or args.samples is not None:
        raise ValueError("--decoders and --samples need --model (generated solutions)")
    out = Path(args.out)
    print(f"GitChameleon: {len(records)} records from {gitchameleon.dataset_folder(args.data)}", file=sys.stderr)
    evaluation = gitchameleon.evaluate(
        records, out, parts=parts, tests=args.tests, timeout_s=args.run_timeout, progress=not args.no_progress,
    )
    summary = evaluation.summary
    if generation is not None:
        valid_ids = {row["id"] for row in evaluation.records if row.get("valid")}
        chosen = [record for record in records if record.example_id in valid_ids]
        environments = {record.example_id: evaluation.states[record.example_id] for record in chosen}
        rows = gitchameleon.generate(chosen, environments, evaluation.executor, generation, out, progress=not args.no_progress)
        summary["generation"] = {
            "model": args.model, "records": len(chosen), "samples": generation.samples,
            "decoders": gitchameleon.summarize_generation(rows, generation.decoders, generation.samples),
        }
    report.write_json(out / "summary.json", summary)
    (out / "table.md").write_text(report.gitchameleon_table(summary), encoding="utf-8")
    print((out / "table.md").read_text(encoding="utf-8"))
    print(gitchameleon.figures_line(summary))
    return 0


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
