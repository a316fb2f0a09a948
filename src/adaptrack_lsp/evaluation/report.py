"""Summaries, Markdown tables shaped like the paper's, and PNG plots.

- `summarize_api(records, decoders, ks)` -> per decoder: ``em_at_k``, ``lm_calls``
  (paper Table 5: avg and per-item min/max averaged over items), ``constraint_recall``,
  ``latency_ms``, validity and failure counts.
- `api_table(summaries)` renders Table 1 (one or two settings side by side) or Table 2
  (one column group) plus a Table 5 style LM-call table.
- `dsl_table` renders Table 4 (KL divergence per task and decoder).
- Plots use matplotlib's Agg backend (no display needed): EM@k per decoder, and the
  sliding-window KL curve (paper Figure 4).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adaptrack_lsp.evaluation.metrics import (
    DEFAULT_KS,
    call_statistics,
    em_table,
    latency_statistics,
)

DECODER_LABELS = {
    "unconstrained": "Unconstrained decoding",
    "constrained": "Constrained decoding",
    "adaptrack": "AdapTrack",
    "exact": "Exact (AdapTrack estimates)",
    "asap": "ASAp",
    "cars": "CARS",
    "rs": "Rejection sampling",
    "ars": "Adaptive rejection sampling",
    "rsft": "RS first token",
    "beam": "Beam search",
    "map": "MAP",
}


def label(decoder: str) -> str:
    return DECODER_LABELS.get(decoder, decoder)


def summarize_api(records: Sequence[Mapping[str, Any]], decoders: Sequence[str], ks: Sequence[int] = DEFAULT_KS) -> dict[str, Any]:
    """Per-decoder metrics over the records of one setting."""
    summary: dict[str, Any] = {}
    for decoder in decoders:
        mine = [r for r in records if r["decoder"] == decoder]
        greedy = [r["greedy"]["match"] if "greedy" in r else None for r in mine]
        sampled = [[s["match"] for s in r["samples"]] for r in mine]
        calls = [[s["lm_calls"] for s in r["samples"]] for r in mine]
        greedy_calls = [r["greedy"]["lm_calls"] for r in mine if "greedy" in r]
        decodes = [d for r in mine for d in ([r["greedy"]] if "greedy" in r else []) + list(r["samples"])]
        recall = [bool(r["constraint_accepts_oracle"]) for r in mine]
        ks_usable = [k for k in ks if k == 1 or all(len(s) >= k for s in sampled)]
        summary[decoder] = {
            "items": len(mine),
            "em_at_k": em_table(greedy, sampled, ks_usable),
            "em1_source": "greedy" if mine and all(g is not None for g in greedy) else "samples",
            "lm_calls": call_statistics(calls),
            "lm_calls_greedy": {"avg": float(np.mean(greedy_calls)) if greedy_calls else None},
            # share of items whose oracle the constraint accepts (an oracle it rejects can
            # never be produced by a constrained decoder)
            "constraint_recall": float(np.mean(recall)) if recall else None,
            "constraint_applies": decoder != "unconstrained",
            "latency_ms": latency_statistics([d["latency_ms"] for d in decodes]),
            "valid_share": float(np.mean([d["valid"] for d in decodes])) if decodes else None,
            "failed_decodes": int(sum(1 for d in decodes if d["prediction"] is None)),
            "incomplete_decodes": int(sum(1 for d in decodes if d["prediction"] is not None and not d["complete"])),
            "backtracks_avg": float(np.mean([d.get("backtracks", 0) for d in decodes])) if decodes else None,
        }
    return summary


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.2f}%"


def _calls(stats: Mapping[str, Any]) -> str:
    if stats.get("avg") is None:
        return "–"
    return f"{stats['avg']:.2f} ({stats['min']:.2f}, {stats['max']:.2f})"


def api_table(
    groups: Mapping[str, Mapping[str, Any]],
    title: str,
    model_label: str,
    ks: Sequence[int] = DEFAULT_KS,
) -> str:
    """Markdown: EM@k (Table 1/2 shape: one column group per setting) and LM calls (Table 5).

    `groups` maps a column-group title (e.g. "TensorFlow v1 setting") to a
    `summarize_api` result.
    """
    names = list(groups)
    decoders: list[str] = []
    for summary in groups.values():
        for d in summary:
            if d not in decoders:
                decoders.append(d)
    lines = [f"### {title}", "", f"Model: {model_label}", ""]
    header = ["Method"] + [f"{g} EM@{k}" if len(names) > 1 else f"EM@{k}" for g in names for k in ks]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for d in decoders:
        row = [label(d)]
        for g in names:
            em = groups[g].get(d, {}).get("em_at_k", {})
            row += [_percent(em.get(f"EM@{k}")) for k in ks]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "EM@1 is from the greedy decode; EM@k (k > 1) from the sampled decodes by the unbiased estimator (paper eq. 5).", ""]

    lines += ["#### Calls to the language model per sample", ""]
    header = ["Method"] + [f"{g} avg (min, max)" for g in names] + [f"{g} greedy decode avg" for g in names]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for d in decoders:
        sampled = [_calls(groups[g].get(d, {}).get("lm_calls", {})) for g in names]
        greedy = [groups[g].get(d, {}).get("lm_calls_greedy", {}).get("avg") for g in names]
        lines.append("| " + " | ".join([label(d)] + sampled + ["-" if v is None else f"{v:.2f}" for v in greedy]) + " |")
    lines += [
        "",
        "avg: mean over items of the mean calls per sampled decode; min/max: per-item minimum/maximum, averaged over items (paper Table 5); greedy: mean calls of the greedy decode (EM@1).",
        "",
    ]

    lines += ["#### Constraint recall, validity and latency", ""]
    header = ["Method"] + [
        f"{g} {c}" for g in names for c in ("constraint recall", "valid outputs", "failed decodes", "latency p50 / p90 (ms)")
    ]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for d in decoders:
        row = [label(d)]
        for g in names:
            s = groups[g].get(d, {})
            recall = _percent(s.get("constraint_recall")) if s.get("constraint_applies", True) else "n/a (no constraint)"
            latency = s.get("latency_ms", {})
            lat = "–" if latency.get("p50") is None else f"{latency['p50']:.1f} / {latency['p90']:.1f}"
            row += [recall, _percent(s.get("valid_share")), str(s.get("failed_decodes", "–")), lat]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        (
            "Constraint recall: share of items whose oracle the constraint accepts (an oracle it rejects can never "
            "be produced under the constraint). Failed decodes: no output (constrained decoding reached a prefix "
            "with no valid continuation the model gives mass to); they count as misses."
        ),
        "",
    ]
    return "\n".join(lines)


def dsl_table(summary: Mapping[str, Mapping[str, Any]], tasks: Sequence[str], model_label: str) -> str:
    """Markdown like paper Table 4: KL divergence to P(s|c) per task and decoder."""
    lines = ["### KL divergence to the exact P(s|c) (lower is better)", "", f"Model: {model_label}", ""]
    header = ["Method"] + list(tasks) + ["average"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for decoder, s in summary.items():
        values = [s["kl"].get(t) for t in tasks]
        row = [label(decoder)] + ["–" if v is None else f"{v:.4f}" for v in values]
        avg = s.get("kl_average")
        row.append("–" if avg is None else f"{avg:.4f}")
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        (
            "KL is D(Q || P(.|c)) of the empirical sample distribution Q against the exact constrained distribution "
            "(exact, unlike the paper's D(Q || P_LM) which is shifted by log Z). inf: some sample violates the constraint."
        ),
        "",
        "#### Calls to the language model and failures",
        "",
        "| Method | LM calls (total) | failed samples | wall time per request (ms) |",
        "|---|---|---|---|",
    ]
    for decoder, s in summary.items():
        lines.append(f"| {label(decoder)} | {s['lm_calls_total']} | {s['failed_samples']} | {s['latency_ms_mean']:.1f} |")
    lines.append("")
    return "\n".join(lines)


# -- plots ------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, figure, axes, path: str | Path, title: str) -> Path:
    """Grid and legend on every panel, the title, then write the PNG and free the figure."""
    for axis in axes:
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return Path(path)


def plot_em_at_k(groups: Mapping[str, Mapping[str, Any]], path: str | Path, title: str) -> Path:
    """EM@k curves per decoder, one panel per column group."""
    plt = _pyplot()
    names = list(groups)
    figure, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for axis, group in zip(axes[0], names):
        for decoder, s in groups[group].items():
            em = s["em_at_k"]
            ks = [int(k.split("@")[1]) for k, v in em.items() if v is not None]
            values = [100.0 * em[f"EM@{k}"] for k in ks]
            axis.plot(ks, values, marker="o", label=label(decoder))
        axis.set_xscale("log")
        axis.set_xticks([1, 3, 5, 10, 20])
        axis.set_xticklabels(["1", "3", "5", "10", "20"])
        axis.set_xlabel("k")
        axis.set_ylabel("EM@k (%)")
        axis.set_ylim(0, 100)
        axis.set_title(group)
    return _save(plt, figure, axes[0], path, title)


def plot_kl_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path, title: str) -> Path:
    """Sliding-window KL per decoder (paper Figure 4); `curves[task][decoder] = values`."""
    plt = _pyplot()
    tasks = list(curves)
    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for axis, task in zip(axes[0], tasks):
        for decoder, values in curves[task].items():
            finite = [v if np.isfinite(v) else np.nan for v in values]
            axis.plot(range(len(finite)), finite, label=label(decoder))
        axis.set_xlabel("window start (sample index)")
        axis.set_ylabel("KL divergence")
        axis.set_title(task)
    return _save(plt, figure, axes[0], path, title)


def write_json(path: str | Path, data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=False, default=_json_default) + "\n", encoding="utf-8")


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


# -- GitChameleon --------------------------------------------------------------------------------
def _share(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f}%"


def _cell(text: str, limit: int = 110) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gitchameleon_table(summary: Mapping[str, Any], misses_shown: int = 25) -> str:
    """Markdown: the counts, recall / catch / false rejection, catches by category, the
    misses (first `misses_shown` of each list; all of them are in summary.json), why
    records left the count, and with a model pass@k per decoder."""
    counts = summary["counts"]
    misses = summary["misses"]
    lines = [
        "### GitChameleon 2.0: the API constraint against execution",
        "",
        f"Python {summary.get('python')}, ground truth: the {summary.get('tests')} tests, constraint: {', '.join(summary.get('parts', []))}",
        "",
        "| Records | installable | importable | valid | cross-version pairs: breaking | passing | failing otherwise |",
        "|---|---|---|---|---|---|---|",
        f"| {counts['records']} | {counts['installable']} | {counts['importable']} | {counts['valid']} | {counts['pairs_breaking']} | {counts['pairs_passing']} | {counts['pairs_failing_otherwise']} |",
        "",
        "| Figure | value | counted |",
        "|---|---|---|",
        f"| Recall: valid reference solutions accepted in their own environment | {_share(summary['recall'])} | {counts['valid'] - len(misses['recall'])} / {counts['valid']} |",
        f"| Catch: breaking cross-version solutions rejected | {_share(summary['catch'])} | {counts['pairs_breaking'] - len(misses['catch'])} / {counts['pairs_breaking']} |",
        f"| False rejection: passing cross-version solutions rejected | {_share(summary['false_rejection'])} | {len(misses['false_rejection'])} / {counts['pairs_passing']} |",
        "",
        "#### Breaking cross-version solutions by category",
        "",
        "| Category | breaking | caught |",
        "|---|---|---|",
    ]
    caught = summary.get("caught_by_category", {})
    for category, number in sorted(summary.get("breaking_by_category", {}).items()):
        lines.append(f"| {category} | {number} | {caught.get(category, 0)} |")
    lines += ["", "#### Misses", ""]
    if not any(misses.values()):
        lines += ["None.", ""]
    else:
        lines += ["| Figure | category | records | code / error | the constraint said |", "|---|---|---|---|---|"]
        for miss in misses["recall"][:misses_shown]:
            lines.append(f"| recall | {miss['category']} | {miss['id']} ({miss['library']} {miss['version']}) | {_cell(miss['line'])} | {_cell(miss['reason'])} |")
        for miss in misses["catch"][:misses_shown]:
            lines.append(f"| catch | {miss['category']} | {miss['source']} in {miss['target']} ({miss['library']} {miss['versions']}) | {_cell(miss['error'])} | {_cell(miss['verdict'])} |")
        for miss in misses["false_rejection"][:misses_shown]:
            lines.append(f"| false rejection | {miss['category']} | {miss['source']} in {miss['target']} ({miss['library']} {miss['versions']}) | {_cell(miss['line'])} | {_cell(miss['reason'])} |")
        lines.append("")
    lines += ["#### Records left out of the figures", "", "| Why | environments | records |", "|---|---|---|"]
    for kind, entries in summary.get("not_installable", {}).items():
        examples = "; ".join(entries[i]["reason"] for i in range(min(2, len(entries))))
        lines.append(f"| not installable: {kind} (e.g. {_cell(examples, 160)}) | {len(entries)} | {sum(len(e['records']) for e in entries)} |")
    for entry in summary.get("not_importable", []):
        lines.append(f"| installed, does not import: {_cell(' '.join(entry['requirements'][:2]))}: {_cell(entry['reason'])} | 1 | {len(entry['records'])} |")
    failing = summary.get("reference_fails", [])
    if failing:
        kinds = Counter(item["failure"].split(":")[0] for item in failing)
        said = ", ".join(f"{kind} {number}" for kind, number in kinds.most_common(6))
        lines.append(f"| reference solution fails its own test ({said}) | – | {len(failing)} |")
    lines.append("")
    libraries = summary.get("libraries", {})
    if libraries:
        lines += ["#### Per library", "", "| Library | records | installable | importable | valid |", "|---|---|---|---|---|"]
        for library, c in libraries.items():
            lines.append(f"| {library} | {c['records']} | {c['installable']} | {c['importable']} | {c['valid']} |")
        lines.append("")
    generation = summary.get("generation")
    if generation:
        ks = sorted({int(k.split("@")[1]) for s in generation["decoders"].values() for k in s["pass_at_k"]})
        lines += [f"#### Generated solutions: {generation['model']}", "", "| Method | " + " | ".join(f"pass@{k}" for k in ks) + " | valid outputs | no output |", "|" + "---|" * (len(ks) + 3)]
        for decoder, s in generation["decoders"].items():
            values = [_percent(s["pass_at_k"].get(f"pass@{k}")) for k in ks]
            lines.append(f"| {label(decoder)} | " + " | ".join(values) + f" | {_percent(s['valid_share'])} | {s['no_output']} |")
        lines += ["", f"Over the {generation['records']} valid records; pass@1 from the greedy completion, pass@k from {generation['samples']} samples at temperature 1 (unbiased estimator).", ""]
    return "\n".join(lines)
