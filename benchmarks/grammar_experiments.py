"""Grammar experiments on tabular LMs, where P(s | c) can be enumerated exactly.

Two tables, shaped like the papers':

- AdapTrack Table 4 / Figure 4 (adaptrack.txt §6.4): KL divergence of each decoder's
  samples to the exact P(s | c) on the binary task written as a grammar, balanced
  brackets (constituency-parse-like, CP) and a small SyGuS SLIA-style grammar; one
  request of `--samples` samples per (task, decoder), estimates shared across the
  request as in the paper; plus the sliding-window KL plot (window: a quarter of the
  samples).
- CARS Table 7 (cars.txt §F.6): LM calls (and attempts, CARS's "generations") to reach
  100 valid samples for rs, ars, rsft, cars and exact on a JSON grammar (at least three
  key-value pairs, a fixed first pair) and an XML grammar (a DOCTYPE with exactly one
  ATTLIST), and the KL of GCD's distribution to P(s | c) (exact, by enumeration).

The grammars and task LMs are in tests/data/grammars/ (`<name>.lark`, `<name>.task.json`;
the binary task's LM is tests/data/tasks/binary.json).
The LMs are seeded bigram models (`grammar_tasks.ngram_task`): the hand-set successor
weights in `EXPERIMENTS` below, each row drawn from a Dirichlet around them
(concentration 30, seed 1); `--write-tasks` writes the files from these definitions
(tests check that the committed files match).  The binary task's LM is the paper's
(five uniform bits).  Every reference P(s | c) is enumerated under the grammar up to the
task's length cap (`CAPS`); samples cut at the cap are partial, never counted.

    python benchmarks/grammar_experiments.py [--samples 2000] [--out DIR] [--smoke]

Last line: `name=value` pairs: `kl_<task>_<decoder>` for every decoder and task of the
first table, `lm_calls_per_100_valid_<task>_<sampler>` and `attempts_per_100_valid_...`
of the second, and `gcd_kl_<task>`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "grammars"
#: the binary task's LM (five uniform bits; its `valid` list is ignored under the grammar)
BINARY_TASK = ROOT / "tests" / "data" / "tasks" / "binary.json"

KL_TASKS = ("binary", "brackets", "slia")
KL_DECODERS = ("constrained", "asap", "adaptrack", "exact", "cars")
CALL_TASKS = ("json", "xml")
CALL_SAMPLERS = ("rs", "ars", "rsft", "cars", "exact")
#: CARS's budget: a sampler that needs more generations for 100 valid samples "timed out"
CARS_BUDGET = 2000
#: length caps (tokens, EOS included) of the enumerated references
CAPS = {"binary": 6, "brackets": 11, "slia": 12, "json": 20, "xml": 18}
SEED = 1
CONCENTRATION = 30.0

#: the bigram LMs: previous token ("" at the start) -> successor weights
EXPERIMENTS: dict[str, dict] = {
    "brackets": {
        "tokens": ["(S", " (NP", " (VP", " )", " the", " dogs", " bark", "$"],
        "successors": {
            "": {"(S": 1.0},
            "(S": {" (NP": 0.55, " (VP": 0.15, " the": 0.1, " )": 0.2},
            " (NP": {" the": 0.6, " dogs": 0.3, " )": 0.1},
            " (VP": {" bark": 0.7, " (NP": 0.2, " )": 0.1},
            " the": {" dogs": 0.8, " )": 0.2},
            " dogs": {" )": 0.5, " bark": 0.25, "$": 0.25},
            " bark": {" )": 0.6, "$": 0.3, " (NP": 0.1},
            " )": {" (VP": 0.35, " )": 0.35, "$": 0.3},
        },
    },
    "slia": {
        "tokens": [" name", ' " "', " (str.++", " (str.at", " (str.len", " 0", " 1", " )", "$"],
        "successors": {
            "": {" (str.++": 0.45, " name": 0.25, " (str.at": 0.2, ' " "': 0.1},
            " (str.++": {" name": 0.45, ' " "': 0.2, " (str.++": 0.1, " (str.at": 0.1, " 0": 0.15},
            " (str.at": {" name": 0.5, " 0": 0.25, " (str.len": 0.1, " (str.++": 0.15},
            " (str.len": {" name": 0.7, " 0": 0.1, " (str.++": 0.2},
            " name": {' " "': 0.25, " name": 0.1, " )": 0.25, " 1": 0.1, " 0": 0.1, "$": 0.2},
            ' " "': {" name": 0.3, " )": 0.35, "$": 0.2, " 0": 0.15},
            " 0": {" )": 0.5, "$": 0.2, " 1": 0.2, " name": 0.1},
            " 1": {" )": 0.6, "$": 0.3, " 0": 0.1},
            " )": {" )": 0.35, "$": 0.35, " name": 0.15, " 1": 0.15},
        },
    },
    "json": {
        "tokens": ["{", '"id":', " 1", ",", ' "name"', ' "ok"', ":", " true", ' "x"', "}", "$"],
        "successors": {
            "": {"{": 0.75, ' "name"': 0.25},
            "{": {'"id":': 0.6, ' "name"': 0.4},
            '"id":': {" 1": 0.9, " true": 0.1},
            " 1": {",": 0.4, "}": 0.6},
            ",": {' "name"': 0.6, ' "ok"': 0.4},
            ' "name"': {":": 1.0},
            ' "ok"': {":": 1.0},
            ":": {" 1": 0.3, " true": 0.4, ' "x"': 0.3},
            " true": {",": 0.1, "}": 0.9},
            ' "x"': {",": 0.6, "}": 0.4},
            "}": {"$": 1.0},
        },
    },
    "xml": {
        "tokens": [
            "<!DOCTYPE", " note", " to", " [", "<!ELEMENT", " (#PCDATA)>", "<!ATTLIST", " id", " lang",
            " CDATA #REQUIRED>", "]>", "<note>", "</note>", "<to>", "</to>", "hi", "yo", "$",
        ],
        "successors": {
            "": {"<!DOCTYPE": 0.7, "<note>": 0.3},
            "<!DOCTYPE": {" note": 0.8, " to": 0.2},
            " note": {" [": 0.4, " (#PCDATA)>": 0.35, " id": 0.15, " to": 0.1},
            " to": {" [": 0.2, " (#PCDATA)>": 0.4, " lang": 0.2, " id": 0.1, " note": 0.1},
            " [": {"<!ELEMENT": 0.8, "<!ATTLIST": 0.2},
            "<!ELEMENT": {" note": 0.6, " to": 0.4},
            " (#PCDATA)>": {"<!ELEMENT": 0.35, "]>": 0.4, "<!ATTLIST": 0.25},
            "<!ATTLIST": {" note": 0.7, " to": 0.3},
            " id": {" CDATA #REQUIRED>": 0.8, "]>": 0.2},
            " lang": {" CDATA #REQUIRED>": 0.7, " id": 0.3},
            " CDATA #REQUIRED>": {"]>": 0.55, "<!ATTLIST": 0.3, "<!ELEMENT": 0.15},
            "]>": {"<note>": 0.6, "<to>": 0.4},
            "<note>": {"hi": 0.6, "yo": 0.4},
            "<to>": {"hi": 0.5, "yo": 0.5},
            "hi": {"</note>": 0.5, "</to>": 0.5},
            "yo": {"</note>": 0.5, "</to>": 0.5},
            "</note>": {"$": 1.0},
            "</to>": {"$": 1.0},
        },
    },
}


def built_task(name: str):
    """The task LM of experiment `name` from its definition (what `--write-tasks` writes)."""
    from adaptrack_lsp.evaluation.grammar_tasks import ngram_task

    spec = EXPERIMENTS[name]
    return ngram_task(spec["tokens"], "$", spec["successors"], seed=SEED, concentration=CONCENTRATION, name=name)


def task_document(name: str) -> dict:
    how = (
        f"bigram LM: benchmarks/grammar_experiments.py EXPERIMENTS[{name!r}], each row Dirichlet "
        f"(concentration {CONCENTRATION:g}) around the hand-set weights, seed {SEED}"
    )
    return {"description": how, **built_task(name).to_dict()}


def write_tasks() -> None:
    for name in EXPERIMENTS:
        path = DATA / f"{name}.task.json"
        path.write_text(json.dumps(task_document(name), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


def grammar_task(name: str):
    from adaptrack_lsp.constrainers.grammar import GrammarSpec
    from adaptrack_lsp.evaluation.grammar_tasks import bind_grammar
    from adaptrack_lsp.evaluation.tasks import load_task

    path = DATA / f"{name}.task.json" if name in EXPERIMENTS else BINARY_TASK
    task = load_task(path, require_valid=False)
    return bind_grammar(task, GrammarSpec.from_file(DATA / f"{name}.lark"), CAPS[name])


def gcd_kl(task) -> float:
    """D(GCD's distribution over the sequences it completes || P(s | c)), exact."""
    exact = task.exact_distribution()
    gcd = task.gcd_distribution().probabilities
    total = math.fsum(gcd.values())
    return math.fsum((p / total) * math.log((p / total) / exact[s]) for s, p in gcd.items() if p > 0)


# -- AdapTrack Table 4 / Figure 4 ---------------------------------------------------------------
def fresh_kl(task, decoder: str, samples: int) -> float | None:
    """KL of `samples` samples drawn one per request, each on a fresh tree (what an
    editor's requests get); cut samples (at the cap) are left out, as in `evaluate_task`."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.evaluation.metrics import kl_divergence

    request = DecodeRequest(
        prompt_ids=[], num_samples=samples, seed=SEED, max_new_tokens=task.max_length, options={"share_estimates": False}
    )
    result = get_decoder(decoder).decode(task.language_model(), task.constraint(), request)
    sequences = [tuple(s.token_ids) for s in result.samples if s.complete]
    kl = kl_divergence(sequences, task.exact_distribution()) if sequences else math.inf
    return kl if math.isfinite(kl) else None


def print_kl_rows(values: dict, tasks, decoders) -> None:
    from adaptrack_lsp.evaluation import report

    print("| Method | " + " | ".join(tasks) + " | average |")
    print("|---|" + "---|" * (len(tasks) + 1))
    for decoder in decoders:
        row = [values[(t, decoder)] for t in tasks]
        cells = ["inf" if v is None else f"{v:.4f}" for v in row]
        average = "inf" if None in row else f"{sum(row) / len(row):.4f}"
        print(f"| {report.label(decoder)} | " + " | ".join(cells) + f" | {average} |")


def kl_table(samples: int, out: Path) -> dict:
    from adaptrack_lsp.evaluation import report
    from adaptrack_lsp.evaluation.dsl import evaluate_task

    shared, fresh = {}, {}
    curves: dict[str, dict[str, list]] = {}
    for name in KL_TASKS:
        task = grammar_task(name)
        curves[name] = {}
        for decoder in KL_DECODERS:
            record = evaluate_task(task, decoder, samples, seed=SEED)
            shared[(name, decoder)] = record["kl"]
            curves[name][decoder] = record["kl_curve"]
            fresh[(name, decoder)] = fresh_kl(task, decoder, samples)
    print(f"\n### KL divergence to the exact P(s|c), {samples} samples per task and decoder (lower is better)\n")
    print("One request, estimates shared across its samples (the paper's protocol):\n")
    print_kl_rows(shared, KL_TASKS, KL_DECODERS)
    print("\nOne sample per request, each on a fresh tree (what an editor's requests get):\n")
    print_kl_rows(fresh, KL_TASKS, KL_DECODERS)
    print()
    print("| Task | valid sequences (≤ cap) | cap (tokens) | LM mass cut by the cap | KL of GCD's distribution (exact) |")
    print("|---|---|---|---|---|")
    for name in KL_TASKS:
        task = grammar_task(name)
        print(f"| {name} | {len(task.exact_distribution())} | {task.max_length} | {task.cut_mass:.4f} | {gcd_kl(task):.4f} |")
    plot = report.plot_kl_curves(curves, out / "grammar_kl_curve.png", "Sliding-window KL to P(s|c) under grammars (shared estimates)")
    print(f"\nplot: {plot}")
    figures = {f"kl_{t}_{d}": shared[(t, d)] for t in KL_TASKS for d in KL_DECODERS}
    figures.update({f"kl_fresh_{t}_{d}": fresh[(t, d)] for t in KL_TASKS for d in KL_DECODERS})
    return figures


# -- CARS Table 7 ---------------------------------------------------------------------------------
def calls_table(valid_wanted: int, max_attempts: int, samples: int) -> dict:
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.evaluation.dsl import evaluate_task

    figures: dict[str, float] = {}
    rows = []
    for name in CALL_TASKS:
        task = grammar_task(name)
        for sampler in CALL_SAMPLERS + ("constrained",):
            options = {} if sampler == "constrained" else {"max_attempts": max_attempts}
            request = DecodeRequest(prompt_ids=[], num_samples=valid_wanted, seed=SEED, max_new_tokens=task.max_length, options=options)
            started = time.perf_counter()
            result = get_decoder(sampler).decode(task.language_model(), task.constraint(), request)
            seconds = time.perf_counter() - started
            valid = sum(1 for s in result.samples if s.complete and s.valid)
            attempts = len(result.samples) + result.failures + result.counters.backtracks
            scale = valid_wanted / valid if valid else math.inf
            rows.append((name, sampler, valid, result.counters.lm_calls * scale, attempts * scale, seconds))
            key = f"{name}_{'gcd' if sampler == 'constrained' else sampler}"
            figures[f"lm_calls_per_{valid_wanted}_valid_{key}"] = result.counters.lm_calls * scale
            figures[f"attempts_per_{valid_wanted}_valid_{key}"] = attempts * scale
        figures[f"gcd_kl_{name}"] = gcd_kl(task)
    print(f"\n### Cost of {valid_wanted} valid samples (one request, shared estimates)\n")
    print(f"T.O.: more than {CARS_BUDGET * valid_wanted // 100} attempts (CARS's budget). Samples cut at the length cap are")
    print(f"not valid samples; where fewer than {valid_wanted} of the {valid_wanted} drawn were valid, costs are scaled to {valid_wanted} valid.\n")
    print("| Task | Sampler | LM calls | attempts (generations) | valid of drawn | wall (s) |")
    print("|---|---|---|---|---|---|")
    for name, sampler, valid, calls, tries, seconds in rows:
        over = " (T.O.)" if tries > CARS_BUDGET * valid_wanted / 100 else ""
        print(f"| {name} | {'GCD' if sampler == 'constrained' else sampler} | {calls:.0f} | {tries:.0f}{over} | {valid}/{valid_wanted} | {seconds:.2f} |")
    print(f"\n### GCD's distortion on the fuzzing grammars (KL to the exact P(s|c); samples: {samples} in one request)\n")
    print("| Task | valid sequences (≤ cap) | cap (tokens) | LM mass of valid sequences | GCD's distribution (exact) | GCD's samples | CARS's samples |")
    print("|---|---|---|---|---|---|---|")
    for name in CALL_TASKS:
        task = grammar_task(name)
        mass = math.fsum(task.sequence_probability(s) for s in task.valid)
        sampled = {d: evaluate_task(task, d, samples, seed=SEED)["kl"] for d in ("constrained", "cars")}
        cells = ["inf" if v is None else f"{v:.4f}" for v in sampled.values()]
        print(f"| {name} | {len(task.valid)} | {task.max_length} | {mass:.4f} | {figures[f'gcd_kl_{name}']:.4f} | " + " | ".join(cells) + " |")
        figures[f"kl_{name}_constrained"] = sampled["constrained"]
        figures[f"kl_{name}_cars"] = sampled["cars"]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=2000, help="samples per task and decoder for the KL table (default 2000)")
    parser.add_argument("--valid", type=int, default=100, help="valid samples to reach in the cost table (default 100)")
    parser.add_argument("--max-attempts", type=int, default=100_000, help="restarts allowed per sample (default 100000)")
    parser.add_argument("--out", default=None, help="folder for the plot (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): 40 samples, 10 valid")
    parser.add_argument("--write-tasks", action="store_true", help="write tests/data/grammars/*.task.json and exit")
    args = parser.parse_args(argv)
    if args.write_tasks:
        write_tasks()
        return 0
    samples, valid = (40, 10) if args.smoke else (args.samples, args.valid)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="grammar-experiments-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    figures = kl_table(samples, out)
    figures.update(calls_table(valid, args.max_attempts, samples))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    print(" ".join(f"{k}={'inf' if v is None or not math.isfinite(v) else f'{v:.4g}'}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
