"""Quality of the built-in model on held-out Python: files of an installed package that is
not in its corpus (scipy by default; its files use numpy, os, warnings, ... like user code).

The model is built fresh into a temporary cache root first (`build_s`; `rss_mb` is the
peak resident memory of this process while it builds, loads and queries the model, up
to the end of the top-1 pass; the process peak after the API index work (jedi parses
the held-out files' imports in this process) is printed on a line before).  Then:

- `top1`: next-token top-1 accuracy over the first `--tokens` tokens of `--files` files,
  each token predicted from up to 1536 tokens before it (the prompt window);
- `chain_em_<decoder>`: at `--cursors` cursors right after ``alias.`` of an imported
  module, each file cut at the cursor, the ghost text (temperature 0, 48 new tokens,
  the live API index of this interpreter) is asked for with each decoder; a hit is when
  the first attribute chain it writes equals the file's (``linalg.norm``).  `exact` at
  temperature 0 is the argmax of P(s | c) (MAP search);
- `line_parses`: the share of adaptrack ghost texts after which the cursor's line still
  parses (`ast`; a line ending in ``:`` gets a ``pass`` body), over cursors whose
  original line parses on its own.

    python benchmarks/builtin_model.py [--held-out scipy] [--files 40] [--cursors 120]
    python benchmarks/builtin_model.py --smoke     # a tiny model and corpus, seconds

Last line: `top1=… chain_em_adaptrack=… chain_em_unconstrained=… line_parses=… build_s=… rss_mb=…`.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import resource
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

DECODERS = ("unconstrained", "constrained", "adaptrack", "exact")
CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
IMPORT = re.compile(r"^import ([\w.]+)(?: as (\w+))?\s*$|^from ([\w.]+) import (\w+)(?: as (\w+))?\s*$", re.M)
#: the model of `--smoke`: the first 300 kB of the standard library, a 1k-token BPE, 4-grams
SMOKE_RECIPE = {"packages": [["stdlib", ""]], "vocab_size": 1000, "order": 4, "max_corpus_bytes": 300_000}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def module_aliases(text: str) -> set[str]:
    """Names bound to imported modules at the top level (``import numpy as np`` -> np)."""
    aliases = set()
    for match in IMPORT.finditer(text):
        module, alias, _source, name, from_alias = match.groups()
        if module:
            aliases.add(alias or module.split(".")[0])
        elif name:
            aliases.add(from_alias or name)
    return aliases


def line_parses(line: str) -> bool:
    """Whether one line of code parses on its own (a block opener with a ``pass`` body)."""
    code = textwrap.dedent(line).strip()
    if not code:
        return False
    candidates = [code]
    if code.rstrip().endswith(":"):
        candidates.append(code + "\n    pass")
    for candidate in candidates:
        try:
            ast.parse(candidate)
            return True
        except (SyntaxError, ValueError):
            continue
    return False


def cursors(files: list[Path], limit: int, per_file: int = 3) -> list[tuple[str, int, str]]:
    """(text, offset, reference chain) right after ``alias.`` on lines that parse alone."""
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        aliases = module_aliases(text)
        if not aliases:
            continue
        pattern = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, aliases))) + r")\.(?=[A-Za-z_])")
        taken = 0
        line_start = 0
        for line in text.split("\n"):
            if taken >= per_file:
                break
            if not line.lstrip().startswith(("import ", "from ", "#")) and line_parses(line):
                match = pattern.search(line)
                if match:
                    offset = line_start + match.end()
                    found.append((text, offset, CHAIN.match(text, offset).group(0)))
                    taken += 1
            line_start += len(line) + 1
    step = max(1, len(found) // limit) if limit else 1
    return found[::step][:limit]


def top1_accuracy(lm, files: list[Path], tokens_per_file: int, window: int = 1536) -> float:
    hits = total = 0
    for path in files:
        ids = lm.encode(path.read_text(encoding="utf-8"))[:tokens_per_file]
        for position in range(1, len(ids)):
            lm.set_prompt(ids[max(0, position - window) : position])
            hits += int(lm.next_logprobs([]).argmax()) == ids[position]
            total += 1
    return hits / max(1, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", default="scipy", help="installed package left out of the corpus")
    parser.add_argument("--files", type=int, default=40, help="held-out files for top-1")
    parser.add_argument("--tokens", type=int, default=1500, help="tokens per file for top-1")
    parser.add_argument("--cursors", type=int, default=120)
    parser.add_argument(
        "--timeout-ms", type=int, default=10_000, help="time limit per completion (the decode returns its best so far)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny model and sizes (seconds)")
    parser.add_argument(
        "--cache", default=None, help="use the model cached under this cache root (build_s is then the load time)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.files, args.tokens, args.cursors = 2, 150, 3

    cache = tempfile.TemporaryDirectory(prefix="adaptrack-builtin-bench-")
    os.environ["ADAPTRACK_CACHE"] = args.cache or cache.name  # a fresh build, and a fresh API index
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from adaptrack_lsp.completion.lm import builtin
    from adaptrack_lsp.completion.lm.corpus import CorpusPackage, package_root

    recipe = {**builtin.BUILTIN_RECIPE, **SMOKE_RECIPE} if args.smoke else builtin.BUILTIN_RECIPE
    corpus_modules = {module for module, _ in recipe["packages"]}
    if args.held_out in corpus_modules:
        sys.exit(f"{args.held_out} is in the model's corpus; choose a package that is not")
    root = package_root(CorpusPackage(args.held_out, args.held_out))
    if root is None:
        sys.exit(f"the held-out package {args.held_out} is not installed")
    files = sorted(root.rglob("*.py"))

    started = time.perf_counter()
    lm = builtin.load_builtin_model(recipe=recipe, show_bar=not args.smoke)
    build_s = time.perf_counter() - started
    print(
        f"# built-in model: {lm.manifest['corpus_tokens']} corpus tokens, {lm.manifest['table_entries']} n-gram entries "
        f"({lm.manifest['table_bytes'] / 1e6:.0f} MB), built in {build_s:.0f} s; held out: {args.held_out} ({len(files)} files)",
        flush=True,
    )
    started = time.perf_counter()
    builtin.load_folder(builtin.builtin_model_path(recipe))
    print(f"# load (memory-mapped) {time.perf_counter() - started:.2f} s", flush=True)

    step = max(1, len(files) // max(1, args.files))
    top1 = top1_accuracy(lm, files[::step][: args.files], args.tokens)
    rss_model_mb = peak_rss_mb()  # build, load and queries of the model alone
    print(f"# top1 {top1:.4f}; peak resident memory so far (build, load, queries) {rss_model_mb:.0f} MB", flush=True)

    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings

    # the interpreter named, as a user configures it: members and signatures come from
    # runtime introspection (jedi's static analysis of scipy's imports takes minutes per
    # new path, time that would be counted against the decoders)
    settings = Settings(model="builtin", timeout_ms=args.timeout_ms, temperature=0.0, python_path=sys.executable)
    if args.smoke:  # validity from a snapshot of numpy: no jedi process to start
        from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot

        snapshot = Path(cache.name) / "numpy-snapshot.json"
        write_snapshot(module_snapshot("numpy", ("linalg", "random")), snapshot)
        settings = settings.replace(api_snapshot=str(snapshot))
    service = CompletionService(settings, workspace_root=cache.name, model_loader=lambda _s, _p: lm)
    service.load()
    chosen = cursors(files, args.cursors)
    hits = dict.fromkeys(DECODERS, 0)
    timed_out = dict.fromkeys(DECODERS, 0)  # answers cut by the time limit
    token_cut = dict.fromkeys(DECODERS, 0)  # answers cut by max_new_tokens
    walls: dict[str, list[float]] = {name: [] for name in DECODERS}  # seconds per completion
    parses = 0
    examples = []
    for number, (text, offset, reference) in enumerate(chosen):
        document = text[:offset]
        line_prefix = document[document.rfind("\n") + 1 :]
        for decoder in DECODERS:
            asked = time.perf_counter()
            result = service.complete(document, offset, settings=settings.replace(decoder=decoder), wait_for_index=True)
            walls[decoder].append(time.perf_counter() - asked)
            answer = result.candidates[0].text if result.candidates else ""
            timed_out[decoder] += int(result.status == "partial" and "time budget" in result.message)
            token_cut[decoder] += int(result.status == "partial" and "max_new_tokens" in result.message)
            chain = CHAIN.match(answer)
            hits[decoder] += int(chain is not None and chain.group(0) == reference)
            if decoder == "adaptrack":
                parses += int(line_parses(line_prefix + answer))
                if number < 8:
                    examples.append(f"#   {line_prefix.strip()}|{answer}   (file: {reference})")
        if (number + 1) % 10 == 0:
            slowest = max(seconds for name in DECODERS for seconds in walls[name][-10 * len(DECODERS) :])
            print(
                f"# {number + 1}/{len(chosen)} cursors (slowest completion of the last 10: {slowest:.1f} s)", flush=True
            )
    service.close()
    count = max(1, len(chosen))
    print("# adaptrack ghost text at the first cursors (| marks the cursor):")
    print("\n".join(examples))
    print(
        f"# cursors={len(chosen)} " + " ".join(f"chain_em_{name}={hits[name] / count:.3f}" for name in DECODERS),
        flush=True,
    )
    print(
        "# seconds per completion (API index waits included), median/max: "
        + " ".join(
            f"{name}={statistics.median(walls[name]):.2f}/{max(walls[name]):.2f}" for name in DECODERS if walls[name]
        ),
        flush=True,
    )
    print(
        f"# cut by the {args.timeout_ms} ms limit: " + " ".join(f"{name}={timed_out[name]}" for name in DECODERS),
        flush=True,
    )
    print("# cut by max_new_tokens: " + " ".join(f"{name}={token_cut[name]}" for name in DECODERS), flush=True)
    cache.cleanup()
    print(f"# process peak resident memory, API index and decoding included: {peak_rss_mb():.0f} MB")
    print(
        f"top1={top1:.4f} chain_em_adaptrack={hits['adaptrack'] / count:.3f} "
        f"chain_em_unconstrained={hits['unconstrained'] / count:.3f} line_parses={parses / count:.3f} "
        f"build_s={build_s:.0f} rss_mb={rss_model_mb:.0f}"
    )


if __name__ == "__main__":
    main()
