"""Cross-file context: completions after ``name.`` where ``name`` comes from a sibling
module, with the project context off (`contextTokens` 0) and on (the default).

Each held-out package (installed, and not in the built-in model's corpus: scipy and
matplotlib by default) has its ``.py`` files copied into a temporary workspace (the
package folder under the workspace root; a trusted workspace, so the imported modules
are read from disk).  A cursor sits right after ``name.`` in code where ``name`` is bound
by an import from a module of the same folder (``from . import _ni_support``,
``from ._rotation import Rotation``, ``from matplotlib import _api`` inside
``matplotlib/``), at most `--per-file` per file, spread over the package's non-test
files; the document is the file cut at the cursor (no text after it), opened alone.

Per model (`builtin`, and `tiny` as a plumbing check: a random transformer whose
tokenizer has the Qwen2.5-Coder repository tokens):

- `em`: chain exact match of the ghost text (adaptrack, temperature 0): its first
  attribute chain equals the file's (``_normalize_sequence``);
- `top1`: next-token top-1 accuracy of the raw model over the first 8 tokens of the rest
  of the cursor's line, teacher-forced after the prompt (no token healing);
- `p50_ms` (builtin): median wall time of one completion, off and on, measured in
  turns on the same cursors;
- `refed` (tiny, context on): prompt tokens fed again after each keystroke while the
  next `--refed-chars` characters of the line are typed at the end of the file, on the
  first `--refed-cursors` cursors (``prompt_tokens - prompt_tokens_reused``; the
  transformers backend reuses the longest common prefix with the previous prompt),
  median and max.

Validity comes from a snapshot of numpy (the chains after a sibling name are not API
chains of an installed package; the snapshot keeps the jedi index out of the timings).

    python benchmarks/cross_file.py [--packages scipy,matplotlib] [--cursors 60] [--per-file 2]
    python benchmarks/cross_file.py --smoke     # a tiny built-in model, 4 cursors, seconds

Last line: ``builtin_em_off=… builtin_em_on=… builtin_em_ratio=… builtin_top1_off=…
builtin_top1_on=… builtin_p50_ms_off=… builtin_p50_ms_on=… builtin_latency_ratio=…
tiny_em_off=… tiny_em_on=… tiny_top1_off=… tiny_top1_on=… refed_p50=… refed_max=…
cursors=…``.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import tokenize
from pathlib import Path

CHAIN = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: the model of `--smoke`: the first 300 kB of the standard library, a 1k-token BPE, 4-grams
SMOKE_RECIPE = {"packages": [["stdlib", ""]], "vocab_size": 1000, "order": 4, "max_corpus_bytes": 300_000}
TOP1_TOKENS = 8


def copy_package(package: str, workspace: Path) -> Path:
    """The package's .py files copied under `workspace` (its folder structure kept)."""
    from adaptrack_lsp.completion.lm.corpus import CorpusPackage, package_root

    root = package_root(CorpusPackage(package, package))
    if root is None:
        sys.exit(f"the held-out package {package} is not installed")
    for path in root.rglob("*.py"):
        target = workspace / package / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return workspace / package


def module_file(folder: Path, parts: list[str]) -> Path | None:
    base = folder.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def sibling_names(path: Path, text: str, workspace: Path) -> set[str]:
    """Names bound by imports from modules in `path`'s own folder."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    folder = path.parent
    names = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = folder
            for _ in range(node.level - 1):
                base = base.parent
            parts = (node.module or "").split(".") if node.module else []
        else:
            base, parts = workspace, (node.module or "").split(".")
        for alias in node.names:
            if alias.name == "*":
                continue
            bound = alias.asname or alias.name
            target = module_file(base, [*parts, alias.name])  # a submodule
            owner = target.parent.parent if target is not None and target.name == "__init__.py" else None
            if target is not None and (target.parent == folder or owner == folder):
                names.add(bound)
                continue
            source = module_file(base, parts) if parts else None
            if source is not None and source.parent == folder and source.name != "__init__.py":
                names.add(bound)
    return names


def cursors(package_folder: Path, workspace: Path, limit: int, per_file: int) -> list[tuple[Path, str, int, str]]:
    """(path, text, offset after ``name.``, reference chain), spread over the files."""
    by_file = []
    for path in sorted(package_folder.rglob("*.py")):
        if "tests" in path.relative_to(package_folder).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        names = sibling_names(path, text, workspace)
        if not names:
            continue
        line_starts = [0]
        for line in text.splitlines(keepends=True):
            line_starts.append(line_starts[-1] + len(line))
        found = []
        try:
            tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in (tokenize.NL, tokenize.COMMENT)]
        except (tokenize.TokenError, SyntaxError, IndentationError):
            continue
        for index in range(1, len(tokens) - 2):
            name, dot, member = tokens[index], tokens[index + 1], tokens[index + 2]
            if name.type != tokenize.NAME or name.string not in names or dot.string != "." or member.type != tokenize.NAME:
                continue
            if tokens[index - 1].string == "." or name.line.lstrip().startswith(("import ", "from ")):
                continue
            offset = line_starts[dot.end[0] - 1] + dot.end[1]
            found.append((path, text, offset, CHAIN.match(text, offset).group(0)))
        if found:
            step = max(1, len(found) // per_file)
            by_file.append(found[::step][:per_file])
    chosen = [item for group in by_file for item in group]
    step = max(1, len(chosen) // limit) if limit else 1
    return chosen[::step][:limit]


def top1(host, request, rest: str) -> tuple[int, int]:
    """(hits, tokens) of the raw model's argmax over the first tokens of `rest` (the rest
    of the cursor's line) after the request's prompt (no token healing)."""
    lm = host.model
    with host.lock:
        plan = host.prompt_builder(request.settings, heal=False).build(
            request.text, request.offset, typed_word=request.typed_word, context=request.context
        )
        targets = lm.encode(rest)[:TOP1_TOKENS]
        lm.set_prompt(plan.prompt_ids, cache_key="top1")
        hits = sum(int(int(lm.next_logprobs(targets[:i]).argmax()) == targets[i]) for i in range(len(targets)))
    return hits, len(targets)


def measure(
    service,
    settings,
    items,
    workspace: Path,
    label: str,
    refed: list[int] | None,
    refed_cursors: int = 0,
    refed_chars: int = 0,
    block_changes: list[int] | None = None,
) -> dict:
    """EM, top-1 and wall times with the context off and on (in turns per cursor)."""
    keys = ("em", "top1", "ms", "again_ms", "ctx", "outside", "again_outside", "calls")
    figures = {f"{key}_{state}": [] for key in keys for state in ("off", "on")}
    top_hits = {"off": [0, 0], "on": [0, 0]}
    examples = []
    for number, (path, text, offset, reference) in enumerate(items):
        document = text[:offset]
        line_end = text.find("\n", offset)
        rest = text[offset : len(text) if line_end < 0 else line_end]
        answers = {}
        for state, tokens in (("off", 0), ("on", settings.context_tokens)):
            chosen = settings.replace(context_tokens=tokens)
            started = time.perf_counter()
            result = service.complete(document, offset, settings=chosen, document=str(path), wait_for_index=True)
            elapsed = time.perf_counter() - started
            figures[f"ms_{state}"].append(elapsed * 1000)
            figures[f"outside_{state}"].append((elapsed - result.counters.get("wall_seconds", 0.0)) * 1000)
            figures[f"calls_{state}"].append(result.counters.get("lm_calls", 0))
            answer = result.candidates[0].text if result.candidates else ""
            chain = CHAIN.match(answer)
            figures[f"em_{state}"].append(int(chain is not None and chain.group(0) == reference))
            figures[f"ctx_{state}"].append(result.counters.get("context_tokens", 0))
            answers[state] = answer
            request = service.request(document, offset, settings=chosen, document=str(path))
            hits, count = top1(service.host, request, rest)
            top_hits[state][0] += hits
            top_hits[state][1] += count
        for state, tokens in (("off", 0), ("on", settings.context_tokens)):  # the same request again, as while typing
            started = time.perf_counter()
            result = service.complete(
                document, offset, settings=settings.replace(context_tokens=tokens), document=str(path), wait_for_index=True
            )
            elapsed = time.perf_counter() - started
            figures[f"again_ms_{state}"].append(elapsed * 1000)
            figures[f"again_outside_{state}"].append((elapsed - result.counters.get("wall_seconds", 0.0)) * 1000)
        if refed is not None and number < refed_cursors:  # typing the file's next characters, one at a time
            service.complete(document, offset, settings=settings, document=str(path), wait_for_index=True)
            for typed in range(1, min(refed_chars, len(rest)) + 1):
                edited = document + rest[:typed]
                result = service.complete(edited, len(edited), settings=settings, document=str(path), wait_for_index=True)
                refed.append(result.counters["prompt_tokens"] - result.counters["prompt_tokens_reused"])
                block_changes[0] += int(result.counters["prompt_tokens_reused"] < result.counters.get("context_tokens", 0))
        if len(examples) < 6 and figures["em_on"][-1] and not figures["em_off"][-1]:
            line = document[document.rfind("\n") + 1 :].strip()
            examples.append(
                f"#   {path.relative_to(workspace)}: {line}|  off {answers['off']!r}  on {answers['on']!r}  (file: {reference})"
            )
        if (number + 1) % 20 == 0:
            print(f"# {label}: {number + 1}/{len(items)} cursors", flush=True)
    count = max(1, len(items))
    summary = {
        "em_off": sum(figures["em_off"]) / count,
        "em_on": sum(figures["em_on"]) / count,
        "top1_off": top_hits["off"][0] / max(1, top_hits["off"][1]),
        "top1_on": top_hits["on"][0] / max(1, top_hits["on"][1]),
        "p50_ms_off": statistics.median(figures["ms_off"]) if items else 0.0,
        "p50_ms_on": statistics.median(figures["ms_on"]) if items else 0.0,
        "again_p50_ms_off": statistics.median(figures["again_ms_off"]) if items else 0.0,
        "again_p50_ms_on": statistics.median(figures["again_ms_on"]) if items else 0.0,
        "context_tokens": statistics.median(figures["ctx_on"]) if items else 0,
    }
    print(
        f"# {label}: em off {summary['em_off']:.3f} on {summary['em_on']:.3f}; top1 off {summary['top1_off']:.3f} "
        f"on {summary['top1_on']:.3f}; p50 ms off {summary['p50_ms_off']:.0f} on {summary['p50_ms_on']:.0f}; "
        f"context tokens p50 {summary['context_tokens']:.0f}",
        flush=True,
    )
    if items:
        decode = {state: [m - o for m, o in zip(figures[f"ms_{state}"], figures[f"outside_{state}"])] for state in ("off", "on")}
        per_call = {state: sum(decode[state]) / max(1, sum(figures[f"calls_{state}"])) for state in ("off", "on")}
        print(
            f"# {label}: p50 ms outside decoding (request, context, prompt, constraint setup) off "
            f"{statistics.median(figures['outside_off']):.0f} on {statistics.median(figures['outside_on']):.0f}; "
            f"decoding p50 ms off {statistics.median(decode['off']):.0f} on {statistics.median(decode['on']):.0f}; "
            f"LM calls p50 off {statistics.median(figures['calls_off']):.0f} on {statistics.median(figures['calls_on']):.0f}; "
            f"decoding ms per LM call off {per_call['off']:.1f} on {per_call['on']:.1f}",
            flush=True,
        )
        print(
            f"# {label}: the same request again (the file's context gathered a keystroke before): p50 ms off "
            f"{summary['again_p50_ms_off']:.0f} on {summary['again_p50_ms_on']:.0f}; outside decoding off "
            f"{statistics.median(figures['again_outside_off']):.0f} on {statistics.median(figures['again_outside_on']):.0f}",
            flush=True,
        )
    if examples:
        print(f"# {label}: right only with the context (| marks the cursor):")
        print("\n".join(examples), flush=True)
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="scipy,matplotlib", help="installed packages left out of the corpus")
    parser.add_argument("--cursors", type=int, default=60, help="cursors per package")
    parser.add_argument("--per-file", type=int, default=2)
    parser.add_argument("--timeout-ms", type=int, default=10_000)
    parser.add_argument("--refed-cursors", type=int, default=10, help="cursors at which typing is replayed (tiny)")
    parser.add_argument("--refed-chars", type=int, default=24, help="characters typed at each of them")
    parser.add_argument("--smoke", action="store_true", help="a tiny built-in model and 2 cursors per package (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.cursors, args.packages, args.refed_cursors, args.refed_chars = 2, "scipy", 1, 6
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot
    from adaptrack_lsp.completion.lm import builtin
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings

    scratch = Path(tempfile.mkdtemp(prefix="adaptrack-cross-file-"))
    try:
        recipe = builtin.BUILTIN_RECIPE
        if args.smoke:  # a small model built into a throwaway cache root
            recipe = {**builtin.BUILTIN_RECIPE, **SMOKE_RECIPE}
            saved = os.environ.get("ADAPTRACK_CACHE")
            os.environ["ADAPTRACK_CACHE"] = str(scratch / "cache")
            try:
                builtin_lm = builtin.load_builtin_model(recipe=recipe, show_bar=False)
            finally:
                os.environ.pop("ADAPTRACK_CACHE") if saved is None else os.environ.__setitem__("ADAPTRACK_CACHE", saved)
        else:
            builtin_lm = builtin.load_builtin_model(recipe=recipe)
        corpus = {entry["module"] for entry in builtin_lm.manifest["corpus"]["packages"]}
        packages = [name.strip() for name in args.packages.split(",") if name.strip()]
        for package in packages:
            if package in corpus or package in {module for module, _ in recipe["packages"]}:
                sys.exit(f"{package} is in the built-in model's corpus ({sorted(corpus)}); choose a package that is not")
        workspace = scratch / "workspace"
        items = []
        for package in packages:
            folder = copy_package(package, workspace)
            found = cursors(folder, workspace, args.cursors, args.per_file)
            print(f"# {package}: {len(found)} cursors after a sibling module's name", flush=True)
            items.extend(found)
        snapshot = scratch / "numpy-snapshot.json"
        write_snapshot(module_snapshot("numpy", ("linalg", "random")), snapshot)
        settings = Settings(
            timeout_ms=args.timeout_ms, temperature=0.0, api_snapshot=str(snapshot), trusted_workspace=True
        )
        print(f"# corpus of the built-in model: {sorted(corpus)}; contextTokens {settings.context_tokens or 'automatic'}", flush=True)
        results = {}
        refed: list[int] = []
        block_changes = [0]
        for name in ("builtin", "tiny"):
            chosen = settings.replace(model=name)
            loader = (lambda _s, _p: builtin_lm) if name == "builtin" else None  # tiny: loaded as users load it
            service = CompletionService(chosen, workspace_root=str(workspace), model_loader=loader)
            service.load()
            try:
                results[name] = measure(
                    service,
                    chosen,
                    items,
                    workspace,
                    name,
                    refed if name == "tiny" else None,
                    args.refed_cursors,
                    args.refed_chars,
                    block_changes,
                )
            finally:
                service.close()
        b, t = results["builtin"], results["tiny"]
        refed.sort()
        p95 = refed[int(0.95 * (len(refed) - 1))] if refed else 0
        print(
            f"# prompt tokens fed again per keystroke at the end of a file (tiny, context on), {len(refed)} keystrokes: "
            f"p50 {statistics.median(refed) if refed else 0:.0f}, p95 {p95}, max {max(refed) if refed else 0} (the most: "
            f"the file's window moving up, a quarter window every so often); keystrokes that changed the context "
            f"block: {block_changes[0]}"
        )
        print(
            f"builtin_em_off={b['em_off']:.3f} builtin_em_on={b['em_on']:.3f} "
            f"builtin_em_ratio={b['em_on'] / max(b['em_off'], 1e-9):.2f} "
            f"builtin_top1_off={b['top1_off']:.3f} builtin_top1_on={b['top1_on']:.3f} "
            f"builtin_p50_ms_off={b['p50_ms_off']:.0f} builtin_p50_ms_on={b['p50_ms_on']:.0f} "
            f"builtin_latency_ratio={b['p50_ms_on'] / max(b['p50_ms_off'], 1e-9):.2f} "
            f"builtin_again_latency_ratio={b['again_p50_ms_on'] / max(b['again_p50_ms_off'], 1e-9):.2f} "
            f"tiny_em_off={t['em_off']:.3f} tiny_em_on={t['em_on']:.3f} "
            f"tiny_top1_off={t['top1_off']:.3f} tiny_top1_on={t['top1_on']:.3f} "
            f"refed_p50={statistics.median(refed) if refed else 0:.0f} refed_p95={p95} "
            f"refed_max={max(refed) if refed else 0} block_changes={block_changes[0]} "
            f"cursors={len(items)}"
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
