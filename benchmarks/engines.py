"""Engines on one CPU machine: transformers fp32 against llama.cpp in process (f16, Q8_0,
Q4_K_M GGUFs) against the server backend (llama-server on 127.0.0.1), same prompt.

Models: random-weight Qwen2.5-Coder-0.5B and -1.5B configurations (the published
config.json values; weights drawn with a fixed seed, stored as f16 safetensors in a model
folder with the project's Qwen2-sized tokenizer, `build_large_tokenizer(151_643)`), so
every engine runs the same weights: transformers loads the folder in float32,
`adaptrack-lsp export-gguf` writes the GGUFs (k-quants through llama.cpp's quantizer).
Folders and GGUFs are cached under the cache root (`bench-engines-*`).  Prompt: the same
~1,000-token numpy file ending in ``np.`` for every row (`decoding_overhead.build_prompt`).
Constraint: the API monitor over the installed numpy's names.

Rows per model and engine:
- ``own``: the engine's own plain greedy generation on the same file, ms per generated
  token (2 x `--new-tokens` tokens after the prompt; median of `--repeats` runs before the
  engine's other rows and as many after them, so that a busy machine's drift hits both): transformers' one-token forward + argmax loop (what
  ``generate`` runs), llama.cpp's decode + greedy sampler loop on the same context the
  backend uses, llama-server's own ``timings.predicted_per_token_ms``;
- ``greedy`` and ``exact k=5``: our greedy AdapTrack and the exact sampler with 5 samples
  at temperature 1, ms per LM call (decode wall / LM calls, prompt cached; median of
  `--repeats` after a warm-up run), with LM calls, and for the server its calls;
- ``ghost``: `CompletionService.complete` (greedy AdapTrack, the API constraint alone as
  in the other rows: a random-weight model's text is rarely Python, and the syntax
  constraint would make each completion a search to the time limit) over `--edits`
  successive edits at the end of the file: wall p50/p95, LM calls and server calls per
  completion; then where a completion's time goes (mean per completion, from the
  decode's counters): the prompt (tokens fed after the edit, seconds in `set_prompt`
  and their forward), the tree's nodes (tokens fed, re-fed after branch switches,
  branch switches, forward seconds), KV work on branch switches, distribution handling
  (log-softmax, copies of the 152k-entry vector, the tree's per-node storage, sampler
  proposals), the constraint, and other (the rest of the request: prompt plan,
  constraint set-up, bookkeeping); and the budget 1.2 x (LM calls x greedy ms per LM
  call) + the prompt's re-feed, against which the p50 is measured;
- llama.cpp only: what a branch switch costs in the KV cache, both ways: a sequence
  copy (`llama_memory_seq_cp`, what the backend does) and a truncation
  (`llama_memory_seq_rm`, after which the divergent tokens are fed again);
- the ``greedy`` and ``exact k=5`` rows end with the same split per LM call;
- server only: server calls per greedy completion on the model's own path (no
  constraint, so the path is valid), where lookahead should make it 1.

Last line: ``llamacpp_node_over_own_token=... llamacpp_speedup_vs_transformers_0_5b=...
server_calls_per_greedy=... server_p50_over_inprocess=... ghost_p50_over_budget_max=...
ghost_outside_model_max=... ghost_speedup_vs_transformers_0_5b=...
ghost_speedup_over_call_speedup=...``: greedy ms
per LM call over own ms per token for llama.cpp at 0.5B (the quantization of the speedup
figure); transformers fp32 greedy ms per LM call over llama.cpp's (best of Q8_0 and
Q4_K_M) at 0.5B; server calls per greedy completion on the model's own path at 0.5B;
ghost text p50 of the server over in-process llama.cpp on the same GGUF at 0.5B; the
largest ghost p50 over its budget among the in-process engines at 0.5B; the largest share
of a ghost completion's time outside the network (KV, distribution, constraint, other)
over its tree's forward (the budget's 20% without drift between rows); transformers'
ghost p50 over that llama.cpp quantization's; that over the per-LM-call speedup.
Goals: <= 1.2, >= 4, <= 1.5, <= 1.3, <= 1, <= 0.2, -, >= 1.  A random-weight model backtracks
far more than a trained one: the per-LM-call figures are the fair ones.  Figures of an
engine not run are ``nan``.

`--smoke`: the tiny model's tokenizer and two tiny Qwen2 configurations, a short prompt,
one edit (seconds; a check that the script runs, its figures mean nothing).

    python benchmarks/engines.py                     # every model and engine (an hour on 2 cores)
    python benchmarks/engines.py --models 0_5b --engines transformers,q8_0,server
    python benchmarks/engines.py --smoke
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decoding_overhead import build_prompt, numpy_names  # noqa: E402

#: Qwen2.5-Coder configurations (config.json of the published models)
CONFIGS = {
    "0_5b": dict(
        vocab_size=151_936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True,
    ),
    "1_5b": dict(
        vocab_size=151_936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True,
    ),
}
SMOKE_CONFIGS = {
    "0_5b": dict(
        vocab_size=6016, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    ),
    "1_5b": dict(
        vocab_size=6016, hidden_size=96, intermediate_size=192, num_hidden_layers=3,
        num_attention_heads=6, num_key_value_heads=2, tie_word_embeddings=True,
    ),
}
QUANTS = ("f16", "q8_0", "q4_k_m")
ENGINES = ("transformers",) + QUANTS + ("server",)
NAN = float("nan")


# -- models ---------------------------------------------------------------------------------
def model_folder(name: str, smoke: bool, seed: int) -> Path:
    """The random-weight model folder (f16 safetensors, config, tokenizer), built once."""
    from adaptrack_lsp.cache import cached_build

    config = (SMOKE_CONFIGS if smoke else CONFIGS)[name]
    key = hashlib.sha256(json.dumps([config, seed, smoke, 2], sort_keys=True).encode()).hexdigest()[:12]

    def build(folder: Path) -> None:
        import torch
        from safetensors.torch import save_file
        from transformers import Qwen2Config, Qwen2ForCausalLM

        tokenizer = load_tokenizer(smoke)
        eos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
        qwen = Qwen2Config(
            **config, max_position_embeddings=32768, rope_theta=1_000_000.0, use_sliding_window=False,
            bos_token_id=None, eos_token_id=eos_id, pad_token_id=eos_id, architectures=["Qwen2ForCausalLM"],
        )
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(qwen).eval()
        tensors = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
        if qwen.tie_word_embeddings:
            tensors.pop("lm_head.weight", None)
        qwen.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        qwen2_pre_tokenizer(folder / "tokenizer.json")
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})

    return cached_build(f"bench-engines-{name}-{key}", build, marker="model.safetensors")


#: a saved Qwen2-sized tokenizer (`--tokenizer DIR`) instead of building it here
TOKENIZER_DIR: str | None = None


def qwen2_pre_tokenizer(path: Path) -> None:
    """Give the saved tokenizer Qwen2's pre-tokenizer (split regex, then byte-level), as a
    real Qwen2.5-Coder folder has: transformers loads a ``qwen2`` folder's tokenizer with
    that pre-tokenizer whatever tokenizer.json says, so every engine (transformers, the
    GGUF's ``qwen2`` pre-tokenizer, a server's tokenizer check) then splits text alike."""
    from adaptrack_lsp.completion.lm.gguf_export import QWEN2_PATTERN

    data = json.loads(path.read_text(encoding="utf-8"))
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    ]}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def folder_tokenizer(folder: Path):
    """The model folder's tokenizer as transformers loads it (the prompt's ids for every engine)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def load_tokenizer(smoke: bool):
    from transformers import PreTrainedTokenizerFast

    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer, tiny_model_path

    if smoke:
        return PreTrainedTokenizerFast.from_pretrained(str(tiny_model_path()))
    if TOKENIZER_DIR:
        return PreTrainedTokenizerFast.from_pretrained(TOKENIZER_DIR)
    return build_large_tokenizer(151_643)


def gguf_file(folder: Path, outtype: str) -> Path:
    """`folder` written as GGUF (`outtype`), once."""
    from adaptrack_lsp.cache import cached_build
    from adaptrack_lsp.completion.lm.gguf_export import export_gguf

    out = cached_build(
        f"{folder.name}-{outtype}", lambda target: export_gguf(folder, target / "model.gguf", outtype), marker="model.gguf"
    )
    return out / "model.gguf"


# -- measurements -------------------------------------------------------------------------------
def constraint_for(lm, prefix: str, kind: str = "api"):
    from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
    from adaptrack_lsp.constrainers.base import Unconstrained
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    if kind == "none":
        return Unconstrained(lm.vocab)
    context = ConstraintContext(document=prefix, prefix=prefix)
    return TokenIndex(ApiMonitor(StaticIndex(numpy_names(), source="numpy names")), lm.vocab, context=context)


def forget_nodes(lm) -> None:
    """Make the next decode evaluate its nodes again: llama.cpp in process and the server
    backend remember the distributions of nodes under an unchanged prompt."""
    if hasattr(lm, "forget_nodes"):
        lm.forget_nodes()
    for memory in ("_cache", "_full"):  # the server backend's per-prompt node memory
        if isinstance(getattr(lm, memory, None), dict):
            getattr(lm, memory).clear()


def decoder_rows(lm, prompt_ids, prefix, args) -> dict:
    """ms per LM call of greedy AdapTrack and exact k=5 (prompt cached), LM and server calls."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder

    rows = {}
    for label, decoder, samples, temperature in (("greedy", "adaptrack", 1, 0.0), ("exact k=5", "exact", 5, 1.0)):
        per_call, calls, server, splits = [], [], [], []
        for run in range(1 + args.repeats):
            forget_nodes(lm)
            request = DecodeRequest(
                prompt_ids=prompt_ids, num_samples=samples, temperature=temperature, max_new_tokens=args.new_tokens,
                seed=args.seed + run, cache_key="bench.py", timeout_s=args.timeout,
            )
            result = get_decoder(decoder).decode(lm, constraint_for(lm, prefix), request)
            counters = result.counters
            if run:  # the first run feeds the prompt and warms the constraint tables
                per_call.append(1e3 * counters.wall_seconds / max(1, counters.lm_calls))
                calls.append(counters.lm_calls)
                server.append(getattr(counters, "server_calls", 0))
                if hasattr(counters, "split"):
                    splits.append({k: 1e3 * v / max(1, counters.lm_calls) for k, v in counters.split().items()})
        split = {k: statistics.median(s[k] for s in splits) for k in splits[0]} if splits else {}
        rows[label] = (statistics.median(per_call), statistics.median(calls), statistics.median(server), split)
    return rows


def own_path_server_calls(lm, prompt_ids, prefix, args) -> float:
    """Server calls per greedy completion where the model's own path is valid (no constraint)."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder

    calls = []
    for run in range(args.repeats):
        forget_nodes(lm)
        request = DecodeRequest(
            prompt_ids=prompt_ids, num_samples=1, temperature=0.0, max_new_tokens=args.new_tokens,
            seed=args.seed + run, cache_key=f"own-{run}.py", timeout_s=args.timeout,
        )
        result = get_decoder("adaptrack").decode(lm, constraint_for(lm, prefix, "none"), request)
        calls.append(getattr(result.counters, "server_calls", 0))
    return statistics.median(calls)


def ghost_rows(lm, prefix, args) -> tuple[list[float], list[int], list[int], list[dict]]:
    """CompletionService over successive edits at the end of the file: walls, LM calls,
    server calls, and each completion's counters (where its time went)."""
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings
    from adaptrack_lsp.constrainers.api import StaticIndex

    names = numpy_names()
    service = CompletionService(
        # the API constraint only, as in the other rows: a random-weight model's text is
        # rarely Python, so the syntax and keyword constraints would turn every completion
        # into a search that runs to the time limit, and the row would time the limit
        Settings(model="bench", decoder="adaptrack", temperature=0.0, max_new_tokens=args.new_tokens,
                 timeout_ms=int(1000 * args.timeout), syntax_constraint=False, keyword_arguments=False),
        model_loader=lambda settings, progress: lm,
        index_factory=lambda settings, root: StaticIndex(names, source="numpy names"),
    )
    service.load()
    body = prefix[: -len("result = np.")]
    walls, calls, server, counters = [], [], [], []
    try:
        for edit in range(args.edits + 1):
            body += f"row_{edit} = np.mean(points, axis={edit % 2})\n"
            text = body + "result = np."
            begin = time.perf_counter()
            result = service.complete(text, len(text), seed=args.seed, document="file:///bench.py")
            wall = time.perf_counter() - begin
            if edit:  # the first request feeds the whole prompt
                walls.append(wall)
                calls.append(int(result.counters.get("lm_calls", 0)))
                server.append(int(result.counters.get("server_calls", 0)))
                counters.append(dict(result.counters, wall=wall))
    finally:
        service.close()
    return walls, calls, server, counters


#: the parts of a ghost completion's wall, in the order printed
GHOST_PARTS = ("prompt", "forward", "kv", "distribution", "constraint", "other")


def ghost_split(counters: list[dict]) -> dict[str, float]:
    """Mean seconds and tokens per completion of each part of the ghost text's wall:
    prompt (tokens fed, seconds in set_prompt, its forward), the tree's nodes (tokens
    fed, re-fed, branch switches, forward seconds), KV work on branch switches,
    distribution handling (log-softmax, copies, per-node storage), the constraint, and
    other (the rest of the request's wall: prompt plan, constraint set-up, bookkeeping).
    Empty when this checkout's counters have no split."""
    if not counters or "prompt_seconds" not in counters[0]:
        return {}
    from adaptrack_lsp.completion.decoding import Counters

    names = set(Counters.__dataclass_fields__)
    rows = []
    for c in counters:
        parts = Counters(**{k: v for k, v in c.items() if k in names}).split()
        parts.pop("other")
        parts["other"] = max(0.0, c["wall"] - sum(parts.values()))
        parts.update(
            prompt_tokens=c["prompt_tokens_fed"], prompt_forward=c["prompt_forward_seconds"],
            tree_tokens=c["tokens_fed"] - c["prompt_tokens_fed"], refed=c["refed_tokens"],
            switches=c["branch_switches"], wall=c["wall"],
        )
        rows.append(parts)
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]} | {
        "prompt_p50": statistics.median(r["prompt"] for r in rows)}


def outside_model(split: dict[str, float]) -> float:
    """A ghost completion's time outside the network (KV work, distribution handling,
    constraint, other) over its tree's forward time: the budget's 1.2 without the
    drift between rows measured minutes apart on a shared machine."""
    outside = split["kv"] + split["distribution"] + split["constraint"] + split["other"]
    return outside / split["forward"] if split["forward"] > 0 else NAN


def ghost_bound(ghost, per_call_ms: float) -> float:
    """The issue's budget for a ghost completion, ms: 1.2 x (LM calls x ms per LM call) +
    the prompt's re-feed (p50s); nan without the split."""
    split = ghost_split(ghost[3])
    if not split:
        return NAN
    return 1.2 * statistics.median(ghost[1]) * per_call_ms + 1e3 * split["prompt_p50"]


def llamacpp_kv_ops_us(lm, prompt_ids, repeats: int = 200) -> tuple[float, float]:
    """Microseconds of the two ways a llama.cpp branch switch can place a node's parent
    in the KV cache: `llama_memory_seq_cp` of the prompt's cells into a branch sequence
    (metadata: no tensor is copied; what the backend does) and KV truncation
    (`llama_memory_seq_rm` of a sequence's last cells, which must then re-feed the
    divergent tokens at a forward each)."""
    lm.forget_nodes()
    lm.set_prompt(prompt_ids, cache_key="kv-ops")
    engine, length, branch = lm.engine, len(lm._active.prompt), 1
    copies, truncations = [], []
    try:
        for _ in range(repeats):
            begin = time.perf_counter()
            engine.seq_cp(0, branch, length)
            copies.append(time.perf_counter() - begin)
            begin = time.perf_counter()
            engine.seq_rm(branch, length - 8, -1)
            truncations.append(time.perf_counter() - begin)
            engine.seq_rm(branch)
    finally:
        engine.seq_rm(branch)
        lm.forget_nodes()
    return 1e6 * statistics.median(copies), 1e6 * statistics.median(truncations)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def transformers_own_ms(model, prompt_ids, new_tokens: int) -> float:
    """ms per token of transformers' greedy step loop (a one-token forward on the cache +
    argmax: what ``generate`` runs), prompt evaluated first."""
    import torch

    from adaptrack_lsp.completion.lm.hf import cache_keyword, returned_cache

    device = next(model.parameters()).device
    keyword = cache_keyword(model)
    with torch.inference_mode():
        output = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True, logits_to_keep=1)
        cache, token = returned_cache(output), int(output.logits[0, -1].argmax())  # .item() waits for the GPU
        begin = time.perf_counter()
        for _ in range(new_tokens):
            output = model(input_ids=torch.tensor([[token]], device=device), use_cache=True, **{keyword: cache})
            cache, token = returned_cache(output), int(output.logits[0, -1].argmax())
        return 1e3 * (time.perf_counter() - begin) / new_tokens


def llamacpp_own_ms(lm, prompt_ids, new_tokens: int) -> float:
    """ms per token of llama.cpp's plain greedy generation (llama_decode of one token +
    its greedy sampler) on the backend's own context, prompt evaluated first."""
    engine = lm.engine
    llama_cpp = engine.llama_cpp
    lm.clear_cache()
    sampler = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    llama_cpp.llama_sampler_chain_add(sampler, llama_cpp.llama_sampler_init_greedy())
    try:
        for begin in range(0, len(prompt_ids), engine.batch_tokens):
            part = prompt_ids[begin : begin + engine.batch_tokens]
            last = begin + len(part) == len(prompt_ids)
            assert engine.decode([(t, begin + i, 0, last and i == len(part) - 1) for i, t in enumerate(part)]) == 0
        token = llama_cpp.llama_sampler_sample(sampler, engine.context, -1)
        position = len(prompt_ids)
        started = time.perf_counter()
        for _ in range(new_tokens):
            assert engine.decode([(token, position, 0, True)]) == 0
            token = llama_cpp.llama_sampler_sample(sampler, engine.context, -1)
            position += 1
        return 1e3 * (time.perf_counter() - started) / new_tokens
    finally:
        llama_cpp.llama_sampler_free(sampler)
        lm.clear_cache()


# -- llama-server ----------------------------------------------------------------------------
def llama_server_binary() -> Path | None:
    from adaptrack_lsp.config import cache_root

    explicit = os.environ.get("ADAPTRACK_LLAMA_SERVER")
    path = Path(explicit) if explicit else cache_root() / "llama.cpp-0.3.36" / "bin" / "llama-server"
    return path if path.is_file() else None


@contextlib.contextmanager
def llama_server(binary: Path, gguf: Path, threads: int, context: int, gpu: bool = False):
    """llama-server on 127.0.0.1 (a free port) serving `gguf`; yields its base URL."""
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from adaptrack_lsp.completion.lm.llamacpp import default_repack

    command = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port), "-c", str(context),
               "-t", str(threads), "-tb", str(threads), "-np", "1", "--no-webui", "--log-disable"]
    if not default_repack():  # as in process: llama.cpp's AMX kernels crash on this CPU
        command.append("--no-repack")
    if gpu:
        command += ["-ngl", "999"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {process.returncode}: {' '.join(command)}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("llama-server did not become ready in 300 s")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def server_own_ms(url: str, prompt_ids, new_tokens: int) -> float:
    """The server's own ms per generated token, greedy, prompt cached by a first request:
    llama-server's ``timings.predicted_per_token_ms``; elsewhere (vLLM, SGLang) the wall
    of /v1/completions with 1 + N tokens minus that with 1, over N."""
    import httpx

    body = {"prompt": list(prompt_ids), "n_predict": new_tokens, "temperature": 0.0, "top_k": 1,
            "cache_prompt": True, "ignore_eos": True}
    reply = httpx.post(f"{url}/completion", json={**body, "n_predict": 1}, timeout=600)
    if reply.status_code == 200:
        reply = httpx.post(f"{url}/completion", json=body, timeout=600)
        reply.raise_for_status()
        return float(reply.json()["timings"]["predicted_per_token_ms"])
    model = httpx.get(f"{url}/v1/models", timeout=60).json()["data"][0]["id"]

    def wall(tokens: int) -> float:
        begin = time.perf_counter()
        answer = httpx.post(f"{url}/v1/completions", timeout=600, json={
            "model": model, "prompt": list(prompt_ids), "max_tokens": tokens, "min_tokens": tokens,
            "temperature": 0.0, "ignore_eos": True})
        answer.raise_for_status()
        return time.perf_counter() - begin

    wall(1 + new_tokens)  # warm-up, prompt into the prefix cache
    return statistics.median(1e3 * (wall(1 + new_tokens) - wall(1)) / new_tokens for _ in range(3))


def server_lm(folder: Path, url: str, args):
    """The server backend for `url` with the model folder's tokenizer, or None (with the
    reason) when this checkout has no server backend."""
    from adaptrack_lsp.completion.lm import loading
    from adaptrack_lsp.config import parse_settings, settings_schema

    if "server" not in loading.BACKENDS or "endpoint" not in settings_schema()["properties"]:
        return None, "this checkout has no server backend (completion/lm/server.py)"
    settings, problems = parse_settings(
        {"model": str(folder), "backend": "server", "endpoint": url, "tokenizer": str(folder),
         "timeoutMs": int(1000 * args.timeout)}
    )
    if problems:
        return None, "; ".join(problems)
    return loading.load_for_settings(settings), ""


# -- the run ----------------------------------------------------------------------------------
def print_rows(label: str, own_ms: float, rows: dict, ghost, extra: str = "") -> None:
    print(f"  {label:<22} own {own_ms:8.2f} ms/token", flush=True)
    for name, (per_call, calls, server, split) in rows.items():
        served = f", {server:.0f} server calls" if server else ""
        parts = ", ".join(f"{k} {v:.2f}" for k, v in split.items() if k != "prompt")
        parts = f" [{parts} ms per call]" if parts else ""
        print(f"  {label:<22} {name:<10} {per_call:8.2f} ms per LM call ({calls:.0f} LM calls{served}); "
              f"x{per_call / own_ms:.2f} own token{parts}", flush=True)
    walls, calls, server = ghost[:3]
    served = f", server calls p50 {statistics.median(server):.0f}" if any(server) else ""
    print(f"  {label:<22} ghost text over {len(walls)} edits: p50 {1e3 * percentile(walls, 0.5):.0f} ms, "
          f"p95 {1e3 * percentile(walls, 0.95):.0f} ms, LM calls p50 {statistics.median(calls):.0f}{served}{extra}",
          flush=True)
    split = ghost_split(ghost[3])
    if split:
        print(f"  {label:<22} ghost split (mean ms per completion): "
              f"prompt {1e3 * split['prompt']:.0f} ({split['prompt_tokens']:.0f} tokens, forward "
              f"{1e3 * split['prompt_forward']:.0f}) | tree forward {1e3 * split['forward']:.0f} "
              f"({split['tree_tokens']:.1f} tokens, {split['refed']:.1f} re-fed, {split['switches']:.1f} branch switches) "
              f"| KV {1e3 * split['kv']:.1f} | distribution {1e3 * split['distribution']:.1f} "
              f"| constraint {1e3 * split['constraint']:.1f} | other {1e3 * split['other']:.1f} "
              f"| wall {1e3 * split['wall']:.0f}", flush=True)
        per_call = rows["greedy"][0]
        bound = ghost_bound(ghost, per_call)
        print(f"  {label:<22} ghost budget: 1.2 x {statistics.median(calls):.0f} LM calls x {per_call:.2f} ms + prompt "
              f"re-feed {1e3 * split['prompt_p50']:.0f} ms = {bound:.0f} ms; p50 / budget "
              f"{1e3 * percentile(walls, 0.5) / bound:.2f}; outside the model (KV, distribution, constraint, other) "
              f"{100 * outside_model(split):.1f}% of the tree's forward", flush=True)


def run_model(name: str, args, figures: dict) -> None:
    import gc

    folder = model_folder(name, args.smoke, args.seed)
    tokenizer = folder_tokenizer(folder)
    prefix = build_prompt(tokenizer, args.prompt_tokens)
    prompt_ids = tokenizer.encode(prefix, add_special_tokens=False)
    results = figures.setdefault(name, {})
    config = json.loads((folder / "config.json").read_text())
    print(f"model {name}: Qwen2 {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
          f"{config['vocab_size']} logits, random weights (seed {args.seed}); prompt {len(prompt_ids)} tokens", flush=True)

    if "transformers" in args.engines:
        import torch

        from adaptrack_lsp.completion.lm.loading import load_model

        if args.device == "cuda":
            lm = load_model(str(folder), device="cuda", dtype="bfloat16", kv_cache="auto")
            lm.warm_up(1536, args.new_tokens)  # as the server does at load (CUDA graphs)
            label = "transformers bf16 cuda"
        else:
            lm = load_model(str(folder), device="cpu", dtype="float32", kv_cache="dynamic", threads=args.threads)
            torch.set_num_threads(args.threads)
            label = "transformers fp32"
        own_ms = [transformers_own_ms(lm.model, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
        rows = decoder_rows(lm, prompt_ids, prefix, args)
        ghost = ghost_rows(lm, prefix, args)
        own_ms += [transformers_own_ms(lm.model, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
        own = statistics.median(own_ms)
        print_rows(label, own, rows, ghost)
        results["transformers"] = {"own": own, "rows": rows, "ghost": ghost}
        del lm
        gc.collect()

    from adaptrack_lsp.completion.lm.llamacpp import load_llamacpp

    for quant in QUANTS:
        if quant not in args.engines:
            continue
        path = gguf_file(folder, quant)
        lm = load_llamacpp(str(path), threads=args.threads, gpu_layers=None if args.device == "cuda" else 0)
        own_ms = [llamacpp_own_ms(lm, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
        rows = decoder_rows(lm, prompt_ids, prefix, args)
        ghost = ghost_rows(lm, prefix, args)
        own_ms += [llamacpp_own_ms(lm, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
        own = statistics.median(own_ms)
        label = f"llama.cpp {quant} ({path.stat().st_size / 1e6:.0f} MB)"
        print_rows(label, own, rows, ghost)
        copy_us, truncate_us = llamacpp_kv_ops_us(lm, prompt_ids)
        print(f"  {label:<22} branch switch KV ops: seq_cp of the {len(prompt_ids)}-token prompt {copy_us:.0f} us, "
              f"truncation (seq_rm of 8 cells) {truncate_us:.0f} us + a forward per divergent token "
              f"({own:.1f} ms each)", flush=True)
        results[quant] = {"own": own, "rows": rows, "ghost": ghost}
        lm.close()
        del lm
        gc.collect()

    if "server" in args.engines:
        if args.endpoint:  # a server started by hand (vLLM, SGLang) serving this model folder
            served, label = contextlib.nullcontext(args.endpoint), f"server at {args.endpoint}"
        else:
            binary = llama_server_binary()
            if binary is None:
                print("  server: skipped (no llama-server: run .ci/install-llama-cpp or set ADAPTRACK_LLAMA_SERVER)", flush=True)
                return
            path = gguf_file(folder, args.server_quant)
            served = llama_server(binary, path, args.threads, context=4096, gpu=args.device == "cuda")
            label = f"server {args.server_quant} (llama-server)"
        with served as url:
            lm, reason = server_lm(folder, url, args)
            if lm is None:
                print(f"  server: skipped ({reason})", flush=True)
                return
            own_ms = [server_own_ms(url, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
            rows = decoder_rows(lm, prompt_ids, prefix, args)
            own_path = own_path_server_calls(lm, prompt_ids, prefix, args)
            ghost = ghost_rows(lm, prefix, args)
            own_ms += [server_own_ms(url, prompt_ids, 2 * args.new_tokens) for _ in range(args.repeats)]
            own = statistics.median(own_ms)
            print_rows(label, own, rows, ghost, f"; own path: {own_path:.1f} server calls per greedy completion")
            results["server"] = {"own": own, "rows": rows, "ghost": ghost, "own_path_calls": own_path}


def summary(figures: dict, args) -> str:
    base = figures.get("0_5b", {})

    def greedy(engine: str) -> float:
        return base[engine]["rows"]["greedy"][0] if engine in base else NAN

    def ghost_p50(engine: str) -> float:
        return 1e3 * percentile(base[engine]["ghost"][0], 0.5) if engine in base else NAN

    quant = min((q for q in ("q8_0", "q4_k_m") if q in base), key=greedy, default=None)
    node_over_own = greedy(quant) / base[quant]["own"] if quant else NAN
    speedup = greedy("transformers") / greedy(quant) if quant and "transformers" in base else NAN
    ghost_speedup = ghost_p50("transformers") / ghost_p50(quant) if quant and "transformers" in base else NAN
    calls = base["server"]["own_path_calls"] if "server" in base else NAN
    p50_ratio = NAN
    if "server" in base and args.server_quant in base:
        p50_ratio = percentile(base["server"]["ghost"][0], 0.5) / percentile(base[args.server_quant]["ghost"][0], 0.5)
    over_budget = [ghost_p50(e) / ghost_bound(r["ghost"], greedy(e)) for e, r in base.items() if e in ("transformers",) + QUANTS]
    over_budget = [x for x in over_budget if x == x]
    outside = [outside_model(ghost_split(r["ghost"][3])) for e, r in base.items()
               if e in ("transformers",) + QUANTS and ghost_split(r["ghost"][3])]
    if quant:
        print(f"0.5B: llama.cpp {quant} greedy {greedy(quant):.2f} ms per LM call, own {base[quant]['own']:.2f} ms/token")
    return (
        f"llamacpp_node_over_own_token={node_over_own:.3f} llamacpp_speedup_vs_transformers_0_5b={speedup:.2f} "
        f"server_calls_per_greedy={calls:.2f} server_p50_over_inprocess={p50_ratio:.3f} "
        f"ghost_p50_over_budget_max={max(over_budget) if over_budget else NAN:.3f} "
        f"ghost_outside_model_max={max(outside) if outside else NAN:.3f} "
        f"ghost_speedup_vs_transformers_0_5b={ghost_speedup:.2f} "
        f"ghost_speedup_over_call_speedup={ghost_speedup / speedup if speedup == speedup else NAN:.3f}"
    )


def machine_line(args) -> str:
    try:
        load = os.getloadavg()
    except OSError:
        load = (NAN, NAN, NAN)
    from adaptrack_lsp.completion.lm.llamacpp import default_repack

    return (f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.threads} threads per engine; llama.cpp weight "
            f"repacking {'on' if default_repack() else 'off (AMX CPU)'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny configurations, short prompt (a run check)")
    parser.add_argument("--models", default="0_5b,1_5b")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"any of {','.join(ENGINES)}")
    parser.add_argument("--server-quant", default="q8_0", choices=QUANTS, help="the GGUF llama-server serves")
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--edits", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per decode")
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 1) // 2), help="per engine (default: half the cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cuda: transformers in bf16 (static cache), llama.cpp and llama-server with every layer on the GPU")
    parser.add_argument("--endpoint", help="a running server (vLLM, SGLang) serving the model folder, instead of llama-server")
    parser.add_argument("--tokenizer", help="folder of a saved Qwen2-sized tokenizer (see --save-tokenizer)")
    parser.add_argument("--save-tokenizer", metavar="DIR", help="build the tokenizer, save it to DIR and exit")
    parser.add_argument("--prepare", action="store_true", help="build the model folders and GGUFs (cached), print their paths, exit")
    args = parser.parse_args()
    global TOKENIZER_DIR
    TOKENIZER_DIR = args.tokenizer
    if args.save_tokenizer:
        load_tokenizer(False).save_pretrained(args.save_tokenizer)
        print(f"tokenizer saved to {args.save_tokenizer}")
        return 0
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines {sorted(unknown)}; choose from {','.join(ENGINES)}")
    if args.smoke:
        args.prompt_tokens = min(args.prompt_tokens, 200)
        args.repeats, args.edits, args.new_tokens = 1, min(args.edits, 1), min(args.new_tokens, 4)
        args.timeout = min(args.timeout, 20.0)
        args.threads = 1
    if args.prepare:
        for name in args.models.split(","):
            folder = model_folder(name.strip(), args.smoke, args.seed)
            print(folder)
            for quant in QUANTS:
                print(gguf_file(folder, quant))
        return 0
    print(machine_line(args), flush=True)
    figures: dict = {}
    for name in args.models.split(","):
        run_model(name.strip(), args, figures)
    print(machine_line(args), flush=True)
    print(summary(figures, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
