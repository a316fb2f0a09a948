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

These figures are the base model's (library shards off): the baseline of the second
part, `--libraries`, which measures the library shards (`completion/lm/shards.py`) on
the tests of libraries installed in a project environment (`--python`), shards built
from the same libraries without their tests.  Per library, with shards off and on, each
in the same run and the two interleaved cursor by cursor:

- the shard's build time (`shard_build_s`, fresh, in this process) and table size;
- `top1`: next-token top-1 over the first `--lib-tokens` tokens of `--lib-files` test
  files, the model told the file's imports (as a request tells it);
- `chain_em`: adaptrack ghost text at cursors right after ``alias.`` of the library
  (``pd.``) and after a typed receiver of one of its types (``df.`` where ``df =
  DataFrame(...)``), `--lib-cursors` of each kind at most; a hit as above;
- `line_parses` as above, over the same cursors;
- `stdlib_chain_em`: the same at cursors after an alias of a standard-library module
  (``os.``) in the same files: what the shards must not make worse;
- `p50_ms`: the median ghost-text time (the completion without the API index's waits).

`--fit LIBS` instead fits the shards' weights per kind of position
(`builtin.SHARD_WEIGHTS`) by EM on the tests of other libraries (`shards.fit_shard_weights`);
`--build LIBS` only builds those libraries' shards, fresh, and says what each cost (the
large-library case: torch, TensorFlow).  `--answers FILE` appends every library cursor's
ghost texts, off and on, to FILE (JSON lines: library, kind, line, file's chain, off, on).

    python benchmarks/builtin_model.py [--held-out scipy] [--files 40] [--cursors 120]
    python benchmarks/builtin_model.py --libraries pandas,scipy,networkx --python /tmp/env/bin/python
    python benchmarks/builtin_model.py --fit matplotlib,sympy --files 30 --tokens 1500
    python benchmarks/builtin_model.py --build torch,tensorflow --cache ~/.cache/adaptrack-lsp
    python benchmarks/builtin_model.py --smoke     # a tiny model, corpus and fake library, seconds

Last line: `top1=… chain_em_adaptrack=… chain_em_unconstrained=… line_parses=… build_s=… rss_mb=…`
and, with `--libraries`, `lib_chain_em_off=… lib_chain_em_on=… lib_chain_ratio=… ...`
(all libraries' cursors together) and the same per library (`pandas_chain_em_on=…`).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import textwrap
import time
import venv
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


# -- the library shards ---------------------------------------------------------------------
#: the fake library of `--smoke`: a package with a distinctive API, its docstrings and tests
FAKE_LIBRARY = {
    "__init__.py": '''"""Frames of zorbs.

>>> import zorblib as zl
>>> frame = zl.read_zorbs("data.zorb")
>>> frame.quantize_zorbs(levels=4)
>>> zl.merge_frames([frame, frame])
"""
from zorblib.core import ZorbFrame, merge_frames, read_zorbs
''',
    "core.py": '''class ZorbFrame:
    """A frame.

    >>> frame = zl.read_zorbs("data.zorb")
    >>> frame.quantize_zorbs(levels=4)
    """

    def quantize_zorbs(self, levels=2):
        return ZorbFrame()

    def total_zorbs(self):
        return 0


def read_zorbs(path):
    """>>> zl.read_zorbs("data.zorb")"""
    return ZorbFrame()


def merge_frames(frames):
    """>>> zl.merge_frames([zl.read_zorbs("a.zorb"), zl.read_zorbs("b.zorb")])"""
    return ZorbFrame()
''',
    "tests/__init__.py": "",
    "tests/test_core.py": '''import os

import zorblib as zl
from zorblib import ZorbFrame


def test_read():
    frame = zl.read_zorbs(os.path.join("data", "a.zorb"))
    assert frame.total_zorbs() == 0


def test_merge():
    merged = zl.merge_frames([zl.read_zorbs("a.zorb")])
    result = ZorbFrame()
    assert result.quantize_zorbs(levels=4) is not None
    assert os.path.exists("a.zorb") or merged
''',
}


def fake_environment(folder: Path) -> str:
    """A virtual environment (no pip) holding the fake library `zorblib` 1.0; its python."""
    venv.create(folder, with_pip=False, symlinks=True)
    site = next(folder.glob("lib*/python3*/site-packages"))
    for name, text in FAKE_LIBRARY.items():
        path = site / "zorblib" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    info = site / "zorblib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zorblib\nVersion: 1.0\nLicense-Expression: MIT\n")
    return str(folder / "bin" / "python")


def test_files(location: Path) -> list[Path]:
    """A library's test files (in folders named tests or test): what its shard leaves out."""
    return sorted(p for p in location.rglob("test_*.py") if {"tests", "test"} & set(p.relative_to(location).parts[:-1]))


def spread(items: list, count: int) -> list:
    """`count` items spread evenly over `items`."""
    if count <= 0 or len(items) <= count:
        return list(items)
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def library_cursors(files: list[Path], library: str, per_file: int = 2):
    """(text, offset, reference chain, kind) with kind "alias" (after ``alias.`` of a name
    bound to the library), "receiver" (after a name whose type the document states, of the
    library) or "stdlib" (after an alias of a standard-library module), in code (not in a
    string or comment) on lines that parse alone, at most `per_file` of each kind per file."""
    from adaptrack_lsp.apis.imports import document_roots
    from adaptrack_lsp.apis.receivers import receiver_bindings
    from adaptrack_lsp.completion.lm.builtin import scan_code

    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        roots = document_roots(text)
        if not roots:
            continue
        candidates, line_start = [], 0
        for line in text.split("\n"):
            if not line.lstrip().startswith(("import ", "from ", "#", "@")) and line_parses(line):
                for match in re.finditer(r"(?<![\w.])([A-Za-z_]\w*)\.(?=[A-Za-z_])", line):
                    candidates.append((match.group(1), line_start + match.end()))
            line_start += len(line) + 1
        in_code = scan_code(text, marks=[offset for _, offset in candidates])[1]
        taken = dict.fromkeys(("alias", "receiver", "stdlib"), 0)
        lines_taken = set()
        for (name, offset), code in zip(candidates, in_code):
            line_number = text.count("\n", 0, offset)
            if not code or line_number in lines_taken:
                continue
            kind = None
            if name in roots:
                root = roots[name][0]
                kind = "alias" if root == library else "stdlib" if root in sys.stdlib_module_names else None
            elif receiver_bindings(text, offset, roots).get(name, ("",))[0] == library:
                kind = "receiver"
            if kind is not None and taken[kind] < per_file:
                found.append((text, offset, CHAIN.match(text, offset).group(0), kind))
                taken[kind] += 1
                lines_taken.add(line_number)
    return found


def line_hints(lm, text: str, python_path: str | None):
    """Per line of `text`: the model's library hints as a request at that line gets them
    (the file's imports, the receivers typed there); shards are built first when missing."""
    from adaptrack_lsp.apis.imports import document_roots
    from adaptrack_lsp.apis.receivers import receiver_bindings

    roots = document_roots(text)
    hints, offset, previous = [], 0, None
    for line in text.split("\n"):
        receivers = receiver_bindings(text, offset, roots) if roots else {}
        key = tuple(sorted(receivers.items()))
        if key != previous:
            current = lm.prepare_libraries(imports=roots, receivers=receivers, python_path=python_path, build="now")
            previous = key
        hints.append(current)
        offset += len(line) + 1
    return hints


def top1_with_hints(lm, files: list[Path], tokens_per_file: int, python_path: str | None, shards: bool, window: int = 1536) -> float:
    """`top1_accuracy` with the model told each line's library hints (none when not `shards`)."""
    hits = total = 0
    newlines = [b.count(b"\n") for b in lm.vocab.token_bytes]
    for path in files:
        text = path.read_text(encoding="utf-8")
        hints = line_hints(lm, text, python_path) if shards else None
        ids = lm.encode(text)[:tokens_per_file]
        line = 0
        for position in range(1, len(ids)):
            line += newlines[ids[position - 1]]
            lm.use_libraries(hints[min(line, len(hints) - 1)] if hints else None)
            lm.set_prompt(ids[max(0, position - window) : position])
            hits += int(lm.next_logprobs([]).argmax()) == ids[position]
            total += 1
    lm.use_libraries(None)
    return hits / max(1, total)


def fit_weights(lm, libraries: list[str], python_path: str | None, files_per_library: int, tokens_per_file: int) -> dict:
    """`SHARD_WEIGHTS` fitted on the tests of `libraries` (their shards built without them)."""
    from adaptrack_lsp.completion.lm.shards import fit_shard_weights, locate_library

    environment = lm.libraries.environment(python_path, None, False)
    newlines = [b.count(b"\n") for b in lm.vocab.token_bytes]
    records = []
    for library in libraries:
        source = locate_library(library, environment)
        if source is None:
            sys.exit(f"{library} is not installed in {environment.python}")
        files = spread(test_files(Path(source.location)), files_per_library)
        started = time.perf_counter()
        for path in files:
            text = path.read_text(encoding="utf-8")
            hints = line_hints(lm, text, python_path)
            ids = lm.encode(text)[:tokens_per_file]
            line = 0
            for position in range(1, len(ids)):
                line += newlines[ids[position - 1]]
                lm.use_libraries(hints[min(line, len(hints) - 1)])
                lm.set_prompt(ids[max(0, position - 1536) : position])
                records.append(lm.library_parts([], ids[position]))
        print(f"# fit: {library} {source.version}: {len(files)} test files, {time.perf_counter() - started:.0f} s", flush=True)
    lm.use_libraries(None)
    return fit_shard_weights(records)


def evaluate_library(lm, service, settings, library: str, args, chosen_files: list[Path]) -> dict:
    """Shards off and on, interleaved, for one library's tests (see the module docstring)."""
    from adaptrack_lsp.apis.imports import document_roots

    results = {"off": {}, "on": {}}
    cursors_found = library_cursors(chosen_files, library)
    by_kind = {kind: spread([c for c in cursors_found if c[3] == kind], args.lib_cursors) for kind in ("alias", "receiver", "stdlib")}
    chosen = [c for kind in ("alias", "receiver", "stdlib") for c in by_kind[kind]]
    # every shard the chosen documents need, built before any completion is timed
    for text in dict.fromkeys(c[0] for c in chosen):
        lm.prepare_libraries(imports=document_roots(text), python_path=settings.python_path, build="now")
    outcome = {mode: {"hits": dict.fromkeys(by_kind, 0), "parses": 0, "walls": [], "answers": [], "calls": [], "lm": []} for mode in ("off", "on")}
    for number, (text, offset, reference, kind) in enumerate(chosen):
        document = text[:offset]
        line_prefix = document[document.rfind("\n") + 1 :]
        for mode in (("off", "on") if number % 2 == 0 else ("on", "off")):
            lm.libraries.enabled = mode == "on"
            result = service.complete(document, offset, settings=settings, wait_for_index=True)
            answer = result.candidates[0].text if result.candidates else ""
            chain = CHAIN.match(answer)
            record = outcome[mode]
            record["hits"][kind] += int(chain is not None and chain.group(0) == reference)
            if kind != "stdlib":
                record["parses"] += int(line_parses(line_prefix + answer))
                record["walls"].append(result.counters["service_seconds"] - result.counters["index_wait_seconds"])
                record["calls"].append(result.counters["lm_calls"])
                record["lm"].append(result.counters["lm_seconds"])
            record["answers"].append((kind, line_prefix.strip(), answer, reference))
        if (number + 1) % 20 == 0:
            print(f"# {library}: {number + 1}/{len(chosen)} cursors", flush=True)
    lm.libraries.enabled = True
    counts = {kind: len(items) for kind, items in by_kind.items()}
    library_count = max(1, counts["alias"] + counts["receiver"])
    for mode in ("off", "on"):
        record = outcome[mode]
        results[mode] = {
            "chain_em": (record["hits"]["alias"] + record["hits"]["receiver"]) / library_count,
            "chain_em_alias": record["hits"]["alias"] / max(1, counts["alias"]),
            "chain_em_receiver": record["hits"]["receiver"] / max(1, counts["receiver"]),
            "stdlib_chain_em": record["hits"]["stdlib"] / max(1, counts["stdlib"]),
            "line_parses": record["parses"] / library_count,
            "p50_ms": 1000 * statistics.median(record["walls"]) if record["walls"] else 0.0,
            "p50_lm_calls": statistics.median(record["calls"]) if record["calls"] else 0.0,
            "p50_lm_ms": 1000 * statistics.median(record["lm"]) if record["lm"] else 0.0,
        }
    examples = []
    for off, on in zip(outcome["off"]["answers"], outcome["on"]["answers"]):
        if off[2] != on[2] and CHAIN.match(on[2] or " ") and CHAIN.match(on[2]).group(0) == on[3] and off[1] not in "".join(examples):
            examples.append(f"#   [{off[0]}] {off[1]}|  off: {off[2]!r}  on: {on[2]!r}  (file: {on[3]})")
    results["examples"] = examples
    results["counts"] = counts
    results["hits"] = {mode: outcome[mode]["hits"] for mode in ("off", "on")}
    results["walls"] = {mode: outcome[mode]["walls"] for mode in ("off", "on")}
    results["answers"] = {mode: outcome[mode]["answers"] for mode in ("off", "on")}
    return results


def library_part(lm, args, settings, cache_name: str) -> dict[str, str]:
    """The `--libraries` part: per library, its shard's build and the figures off and on."""
    from adaptrack_lsp.completion.lm.shards import locate_library
    from adaptrack_lsp.completion.service import CompletionService

    figures: dict[str, str] = {}
    settings = settings.replace(python_path=args.python, decoder="adaptrack")
    service = CompletionService(settings, workspace_root=cache_name, model_loader=lambda _s, _p: lm)
    service.load()
    environment = lm.libraries.environment(args.python, None, False)
    totals = {mode: {"hits": 0, "count": 0, "parses": 0, "stdlib_hits": 0, "stdlib": 0, "walls": []} for mode in ("off", "on")}
    top1 = {"off": [], "on": []}
    builds, built = [], {}
    for library in args.libraries.split(","):  # each shard built fresh, before any other needs it
        source = locate_library(library, environment)
        if source is None:
            sys.exit(f"{library} is not installed in {environment.python}")
        started = time.perf_counter()
        shard = lm.libraries.shard(source, build="now")
        built[library] = (source, shard, time.perf_counter() - started)
    for library in args.libraries.split(","):
        source, shard, seconds = built[library]
        manifest = shard.manifest
        builds.append((seconds, shard.tables.nbytes))
        print(
            f"# {source.label}: shard from {manifest['files']} files ({manifest['bytes'] / 1e6:.1f} MB of source"
            + (f", sampled from {manifest['candidate_files']} files, {manifest['candidate_bytes'] / 1e6:.1f} MB" if manifest["sampled"] else "")
            + f"; {manifest['test_files_left_out']} test files left out), {manifest['corpus_tokens']} tokens, "
            f"built in {seconds:.0f} s on {os.cpu_count()} cores, {shard.tables.nbytes / 1e6:.0f} MB of tables",
            flush=True,
        )
        files = spread(test_files(Path(source.location)), args.lib_files)
        scores = {}
        for mode in ("off", "on"):
            scores[mode] = top1_with_hints(lm, files, args.lib_tokens, args.python, shards=mode == "on")
            top1[mode].append(scores[mode])
        print(f"# {library} top1: off={scores['off']:.4f} on={scores['on']:.4f}", flush=True)
        measured = evaluate_library(lm, service, settings, library, args, spread(test_files(Path(source.location)), args.lib_cursor_files))
        counts = measured["counts"]
        print(f"# {library} cursors: alias={counts['alias']} receiver={counts['receiver']} stdlib={counts['stdlib']}")
        for mode in ("off", "on"):
            row = measured[mode]
            print(f"# {library} {mode}: top1={scores[mode]:.4f} " + " ".join(f"{k}={v:.0f}" if k.startswith("p50") else f"{k}={v:.3f}" for k, v in row.items()), flush=True)
            totals[mode]["hits"] += measured["hits"][mode]["alias"] + measured["hits"][mode]["receiver"]
            totals[mode]["count"] += counts["alias"] + counts["receiver"]
            totals[mode]["parses"] += round(row["line_parses"] * max(1, counts["alias"] + counts["receiver"]))
            totals[mode]["stdlib_hits"] += measured["hits"][mode]["stdlib"]
            totals[mode]["stdlib"] += counts["stdlib"]
            figures[f"{library}_chain_em_{mode}"] = f"{row['chain_em']:.3f}"
            figures[f"{library}_top1_{mode}"] = f"{scores[mode]:.4f}"
        figures[f"{library}_shard_s"] = f"{seconds:.0f}"
        figures[f"{library}_shard_mb"] = f"{shard.tables.nbytes / 1e6:.0f}"
        print(f"# {library}: ghost texts that changed and now match the file (first 4):")
        print("\n".join(measured["examples"][:4]) or "#   none")
        for mode in ("off", "on"):
            totals[mode]["walls"].extend(measured["walls"][mode])
        if args.answers:  # every cursor's ghost texts, off and on, for reading the misses
            with open(args.answers, "a", encoding="utf-8") as handle:
                for off, on in zip(measured["answers"]["off"], measured["answers"]["on"]):
                    kind, prefix, _, reference = off
                    handle.write(json.dumps({"library": library, "kind": kind, "line": prefix, "file": reference, "off": off[2], "on": on[2]}) + "\n")
    service.close()
    result = {}
    for mode in ("off", "on"):
        t = totals[mode]
        result[f"lib_chain_em_{mode}"] = t["hits"] / max(1, t["count"])
        result[f"lib_line_parses_{mode}"] = t["parses"] / max(1, t["count"])
        result[f"stdlib_chain_em_{mode}"] = t["stdlib_hits"] / max(1, t["stdlib"])
        result[f"lib_top1_{mode}"] = statistics.mean(top1[mode]) if top1[mode] else 0.0
        result[f"p50_ms_{mode}"] = 1000 * statistics.median(t["walls"]) if t["walls"] else 0.0
    line = {
        "lib_chain_em_off": f"{result['lib_chain_em_off']:.3f}",
        "lib_chain_em_on": f"{result['lib_chain_em_on']:.3f}",
        "lib_chain_ratio": f"{result['lib_chain_em_on'] / max(result['lib_chain_em_off'], 1e-9):.2f}",
        "lib_top1_off": f"{result['lib_top1_off']:.4f}",
        "lib_top1_on": f"{result['lib_top1_on']:.4f}",
        "lib_line_parses_off": f"{result['lib_line_parses_off']:.3f}",
        "lib_line_parses_on": f"{result['lib_line_parses_on']:.3f}",
        "stdlib_chain_em_off": f"{result['stdlib_chain_em_off']:.3f}",
        "stdlib_chain_em_on": f"{result['stdlib_chain_em_on']:.3f}",
        "p50_ms_off": f"{result['p50_ms_off']:.0f}",
        "p50_ms_on": f"{result['p50_ms_on']:.0f}",
        "p50_ratio": f"{result['p50_ms_on'] / max(result['p50_ms_off'], 1e-9):.2f}",
        "shard_build_s_max": f"{max(s for s, _ in builds):.0f}",
        "shard_mb_max": f"{max(b for _, b in builds) / 1e6:.0f}",
    }
    return {**line, **figures}


def build_costs(lm, libraries: list[str], python_path: str) -> dict[str, str]:
    """Each library's shard built fresh: seconds, source read, tables, and the process's
    peak resident memory after it (the base model loaded, the builds one after another)."""
    from adaptrack_lsp.completion.lm.shards import locate_library

    environment = lm.libraries.environment(python_path, None, False)
    figures = {}
    for library in libraries:
        source = locate_library(library, environment)
        if source is None:
            sys.exit(f"{library} is not installed in {environment.python}")
        started = time.perf_counter()
        shard = lm.libraries.shard(source, build="now")
        seconds = time.perf_counter() - started
        manifest = shard.manifest
        print(
            f"# {source.label}: {manifest['files']} files, {manifest['bytes'] / 1e6:.1f} MB of source"
            + (f" sampled from {manifest['candidate_files']} files, {manifest['candidate_bytes'] / 1e6:.1f} MB" if manifest["sampled"] else "")
            + f" ({manifest['test_files_left_out']} test files left out), {manifest['corpus_tokens']} tokens; built in {seconds:.0f} s "
            f"on {os.cpu_count()} cores (reading and tokenizing {manifest['read_seconds']:.0f} s), {shard.tables.nbytes / 1e6:.0f} MB of "
            f"tables; process peak so far {peak_rss_mb():.0f} MB",
            flush=True,
        )
        figures[f"{library}_shard_s"] = f"{seconds:.0f}"
        figures[f"{library}_shard_mb"] = f"{shard.tables.nbytes / 1e6:.0f}"
    figures["rss_mb"] = f"{peak_rss_mb():.0f}"
    return figures


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
    parser.add_argument("--libraries", default="", help="libraries whose shards are measured on their tests (comma-separated)")
    parser.add_argument("--python", default=sys.executable, help="the project environment holding --libraries / --fit")
    parser.add_argument("--lib-files", type=int, default=20, help="test files per library for top-1")
    parser.add_argument("--lib-tokens", type=int, default=1000, help="tokens per file for the libraries' top-1")
    parser.add_argument("--lib-cursor-files", type=int, default=300, help="test files per library searched for cursors")
    parser.add_argument("--lib-cursors", type=int, default=60, help="cursors per library and kind (alias, receiver, stdlib)")
    parser.add_argument("--fit", default="", help="fit the shards' weights on these libraries' tests (comma-separated) and stop")
    parser.add_argument("--no-baseline", action="store_true", help="skip the base model's figures on --held-out")
    parser.add_argument("--answers", default="", help="append every library cursor's ghost texts (off and on) to this JSON-lines file")
    parser.add_argument("--build", default="", help="only build these libraries' shards, fresh, and say what each cost (comma-separated)")
    args = parser.parse_args()
    cache = tempfile.TemporaryDirectory(prefix="adaptrack-builtin-bench-")
    if args.smoke:
        args.files, args.tokens, args.cursors = 2, 150, 3
        args.libraries, args.python = "zorblib", fake_environment(Path(cache.name) / "project-env")
        args.lib_files, args.lib_tokens, args.lib_cursor_files, args.lib_cursors = 1, 150, 5, 3
        args.answers = str(Path(cache.name) / "answers.jsonl")

    os.environ["ADAPTRACK_CACHE"] = args.cache or cache.name  # a fresh build
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
    os.environ["ADAPTRACK_CACHE"] = cache.name  # fresh shards and a fresh API index
    lm.libraries.enabled = False  # the baseline is the base model

    if args.build:
        figures = build_costs(lm, args.build.split(","), args.python)
        cache.cleanup()
        print(" ".join(f"{name}={value}" for name, value in figures.items()))
        return

    if args.fit:
        lm.libraries.enabled = True
        fitted = fit_weights(lm, args.fit.split(","), args.python, args.files, args.tokens)
        for kind, found in fitted.items():
            print(
                f"# fit {kind}: shards {found.shard:.3f}, document x{found.document:g} over {found.tokens} tokens; "
                f"perplexity {found.perplexity_without:.1f} without shards, {found.perplexity:.1f} with"
            )
        cache.cleanup()
        print(" ".join(f"{kind.replace(' ', '_')}={found.shard:.3f}/{found.document:g}" for kind, found in fitted.items()) or "tokens=0")
        return

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
    figures = {} if args.no_baseline else baseline(lm, args, files, settings, cache.name, build_s)
    if args.libraries:
        lm.libraries.enabled = True
        figures.update(library_part(lm, args, settings, cache.name))
    if args.smoke:  # the other modes, at tiny sizes, so that they cannot rot
        fitted = fit_weights(lm, ["zorblib"], args.python, 1, 150)
        print("# smoke fit: " + " ".join(f"{kind.replace(' ', '_')}={found.shard:.3f}/{found.document:g}" for kind, found in fitted.items()))
        print("# smoke build: " + " ".join(f"{k}={v}" for k, v in build_costs(lm, ["zorblib"], args.python).items()))
    cache.cleanup()
    print(" ".join(f"{name}={value}" for name, value in figures.items()) or "libraries=0")


def baseline(lm, args, files: list[Path], settings, workspace: str, build_s: float) -> dict[str, str]:
    """The base model's figures on the held-out package (see the module docstring)."""
    from adaptrack_lsp.completion.service import CompletionService

    step = max(1, len(files) // max(1, args.files))
    top1 = top1_accuracy(lm, files[::step][: args.files], args.tokens)
    rss_model_mb = peak_rss_mb()  # build, load and queries of the model alone
    print(f"# top1 {top1:.4f}; peak resident memory so far (build, load, queries) {rss_model_mb:.0f} MB", flush=True)

    service = CompletionService(settings, workspace_root=workspace, model_loader=lambda _s, _p: lm)
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
    print(f"# process peak resident memory, API index and decoding included: {peak_rss_mb():.0f} MB")
    return {
        "top1": f"{top1:.4f}",
        "chain_em_adaptrack": f"{hits['adaptrack'] / count:.3f}",
        "chain_em_unconstrained": f"{hits['unconstrained'] / count:.3f}",
        "line_parses": f"{parses / count:.3f}",
        "build_s": f"{build_s:.0f}",
        "rss_mb": f"{rss_model_mb:.0f}",
    }


if __name__ == "__main__":
    main()
