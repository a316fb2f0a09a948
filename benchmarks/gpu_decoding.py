"""GPU decoding speed: our cost per LM call against transformers' static-cache `generate`.

Models: random-weight Qwen2.5-Coder-1.5B and -7B configurations in bfloat16 on CUDA
(built on the device, no download).  Tokenizer: the Qwen2-sized byte-level BPE of
`build_large_tokenizer(151_643)`, loaded from a folder (`--tokenizer DIR`): build it on
a machine whose standard library is large enough with `--save-tokenizer DIR` and carry
the folder.  Prompt: the same ~1,000-token numpy file ending in ``np.`` for every row
(`decoding_overhead.build_prompt`); 16 new tokens.

Rows per model:
- transformers ``generate`` with the eager DynamicCache, and with
  ``cache_implementation="static"`` (transformers compiles the one-token step):
  ms per generated token, as (wall of 1 + N tokens - wall of 1 token) / N, so the
  prompt pass is left out; median of `--repeats` runs after warm-up runs.
- ours (`HFLanguageModel` on the path `--kv-cache` selects; ``auto`` is the static
  CUDA-graph path on CUDA) with the ``unconstrained``, ``constrained`` and greedy
  ``adaptrack`` decoders and ``adaptrack`` with k=5 samples, under the API monitor
  over the installed numpy's names: ms per LM call (decode wall / LM calls, prompt
  already cached), median of `--repeats` runs after a warm-up run.  Before them the
  model is warmed up as the server does at load (`warm_up`: CUDA graphs captured for
  the largest prompt the server builds); the capture time is printed, not counted.
- `CompletionService.complete` (greedy adaptrack, 16 new tokens) over 15 successive
  edits at the end of the file: p50/p95 wall and LM calls.
- one greedy ``constrained`` request of 16 new tokens after an edit (prompt reused):
  wall in ms.

Last line: ``ratio_1_5b=... ratio_7b=... service_ratio_7b=... constrained_16_ms_7b=...``
where a ratio is our greedy-adaptrack ms per LM call / static ``generate`` ms per
token; service_ratio is the median over edits of CompletionService wall / (its LM
calls x static ``generate`` ms per token); constrained_16_ms is the wall of the one
constrained request.  Goals: ratios <= 1.2, service_ratio_7b <= 1.5,
constrained_16_ms_7b <= 250.  A random-weight model makes AdapTrack backtrack far more
than a trained one, so the latency goals are per LM call.

`--smoke`: two tiny Qwen2 configurations in float32 on the CPU with the built-in tiny
model's tokenizer and a short prompt (a check that the script runs; its figures mean
nothing).

    python benchmarks/gpu_decoding.py --save-tokenizer .gpu/tokenizer     # CPU machine
    python benchmarks/gpu_decoding.py --tokenizer .gpu/tokenizer          # GPU machine
    python benchmarks/gpu_decoding.py --smoke
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decoding_overhead import build_prompt, numpy_names  # noqa: E402

#: Qwen2.5-Coder configurations (config.json of the published models)
CONFIGS = {
    "1_5b": dict(
        vocab_size=151_936,
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "7b": dict(
        vocab_size=152_064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        tie_word_embeddings=False,
    ),
}
#: the prompt budget of the server's prompt builder (`PromptBuilder.max_prompt_tokens`)
SERVER_PROMPT_TOKENS = 1536
SMOKE_CONFIGS = {
    "1_5b": dict(
        vocab_size=6016,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "7b": dict(
        vocab_size=6016,
        hidden_size=96,
        intermediate_size=192,
        num_hidden_layers=3,
        num_attention_heads=6,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    ),
}


def load_tokenizer(args):
    from transformers import PreTrainedTokenizerFast

    if args.smoke:
        from adaptrack_lsp.completion.lm.tiny import tiny_model_path

        return PreTrainedTokenizerFast.from_pretrained(str(tiny_model_path()))
    if not args.tokenizer:
        raise SystemExit("--tokenizer DIR is needed (build it with --save-tokenizer DIR on a CPU machine)")
    return PreTrainedTokenizerFast.from_pretrained(args.tokenizer)


def build_model(name: str, tokenizer, device, dtype, smoke: bool, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        **(SMOKE_CONFIGS if smoke else CONFIGS)[name],
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        use_sliding_window=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):  # initialise on the device: a 7B model in seconds
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.to(dtype).eval()


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def generate_ms_per_token(model, prompt_ids, new_tokens: int, repeats: int, static: bool, device) -> float:
    """(wall(1 + N) - wall(1)) / N of greedy `generate`, median over repeats."""
    import torch

    input_ids = torch.tensor([prompt_ids], device=device)
    options = dict(do_sample=False, pad_token_id=model.config.eos_token_id)
    if static:
        options["cache_implementation"] = "static"

    def wall(count: int) -> float:
        synchronize(device)
        begin = time.perf_counter()
        with torch.inference_mode():
            output = model.generate(input_ids, max_new_tokens=count, min_new_tokens=count, **options)
        synchronize(device)
        assert output.shape[1] == len(prompt_ids) + count
        return time.perf_counter() - begin

    for _ in range(3 if static else 1):  # compilation / cudnn warm-up
        wall(1 + new_tokens)
        wall(1)
    per_token = []
    for _ in range(repeats):
        long, short = wall(1 + new_tokens), wall(1)
        per_token.append(1e3 * (long - short) / new_tokens)
    return statistics.median(per_token)


def make_lm(model, tokenizer, kv_cache: str, device):
    from adaptrack_lsp.completion.lm.hf import HFLanguageModel, vocabulary_for
    from adaptrack_lsp.completion.lm.static_cache import StaticCacheLanguageModel, use_static_cache

    vocab = vocabulary_for(model, tokenizer)
    if use_static_cache(kv_cache, device):
        return StaticCacheLanguageModel(model, tokenizer, vocab=vocab, name="bench")
    return HFLanguageModel(model, tokenizer, vocab=vocab, name="bench")


def decoder_rows(lm, prompt_ids, prefix, new_tokens, repeats, seed, timeout_s):
    """ms per LM call of each decoder setting (prompt cached), and the constrained request."""
    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.constrainers.api import ApiMonitor, ConstraintContext, StaticIndex
    from adaptrack_lsp.constrainers.base import Unconstrained
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    names = numpy_names()
    context = ConstraintContext(document=prefix, prefix=prefix)

    def constraint(kind: str):
        if kind == "unconstrained":
            return Unconstrained(lm.vocab)
        return TokenIndex(ApiMonitor(StaticIndex(names, source="numpy names")), lm.vocab, context=context)

    settings = {
        "unconstrained": ("unconstrained", 1, 0.0),
        "constrained": ("constrained", 1, 0.0),
        "adaptrack": ("adaptrack", 1, 0.0),
        "adaptrack_k5": ("adaptrack", 5, 1.0),
    }
    rows = {}
    for label, (decoder_name, samples, temperature) in settings.items():
        per_call, calls = [], []
        for run in range(1 + repeats):
            request = DecodeRequest(
                prompt_ids=prompt_ids,
                num_samples=samples,
                temperature=temperature,
                max_new_tokens=new_tokens,
                seed=seed + run,
                cache_key="bench.py",
                timeout_s=timeout_s,
            )
            result = get_decoder(decoder_name).decode(lm, constraint(decoder_name), request)
            counters = result.counters
            if run:  # the first run warms up (graphs, constraint tables)
                per_call.append(1e3 * counters.wall_seconds / max(1, counters.lm_calls))
                calls.append(counters.lm_calls)
        rows[label] = (statistics.median(per_call), statistics.median(calls))
        print(f"  ours {label:<13} {rows[label][0]:8.2f} ms per LM call ({rows[label][1]:.0f} LM calls)", flush=True)

    # one greedy constrained request of N new tokens after an edit, the prompt reused
    edited_prefix = prefix[: -len("result = np.")] + "values = np.asarray(points)\nresult = np."
    edited = lm.encode(edited_prefix)
    lm.set_prompt(prompt_ids, max_new_tokens=new_tokens, cache_key="edit.py")
    request = DecodeRequest(
        prompt_ids=edited,
        num_samples=1,
        temperature=0.0,
        max_new_tokens=new_tokens,
        cache_key="edit.py",
        timeout_s=timeout_s,
    )
    begin = time.perf_counter()
    result = get_decoder("constrained").decode(lm, constraint("constrained"), request)
    constrained_ms = 1e3 * (time.perf_counter() - begin)
    tokens = len(result.samples[0].token_ids) if result.samples else 0
    print(
        f"  constrained request after an edit: {constrained_ms:.1f} ms, {tokens} new tokens, "
        f"{result.prompt_reused}/{len(edited)} prompt tokens reused",
        flush=True,
    )
    return rows, constrained_ms


def service_rows(lm, prefix, new_tokens, seed, edits, timeout_s):
    """CompletionService over successive edits at the end of the file: walls and LM calls."""
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings
    from adaptrack_lsp.constrainers.api import StaticIndex

    names = numpy_names()
    service = CompletionService(
        Settings(
            model="bench",
            decoder="adaptrack",
            temperature=0.0,
            max_new_tokens=new_tokens,
            timeout_ms=int(1000 * timeout_s),
        ),
        model_loader=lambda settings, progress: lm,
        index_factory=lambda settings, root: StaticIndex(names, source="numpy names"),
    )
    service.load()
    body = prefix[: -len("result = np.")]
    walls, calls = [], []
    try:
        for edit in range(edits + 1):
            body += f"row_{edit} = np.mean(points, axis={edit % 2})\n"
            text = body + "result = np."
            begin = time.perf_counter()
            result = service.complete(text, len(text), seed=seed, document="file:///bench.py")
            wall = time.perf_counter() - begin
            if edit:  # the first request warms up
                walls.append(wall)
                calls.append(int(result.counters["lm_calls"]))
    finally:
        service.close()
    return walls, calls


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", help="folder of the saved Qwen2-sized tokenizer")
    parser.add_argument("--save-tokenizer", metavar="DIR", help="build the tokenizer, save it to DIR and exit")
    parser.add_argument("--smoke", action="store_true", help="tiny configurations on the CPU (a run check)")
    parser.add_argument("--models", default="1_5b,7b")
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--kv-cache", help="auto, static or dynamic (our backend's cache; default auto, static with --smoke)"
    )
    parser.add_argument("--edits", type=int, default=15, help="CompletionService requests after successive edits")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per decode")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.save_tokenizer:
        from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer

        build_large_tokenizer(151_643).save_pretrained(args.save_tokenizer)
        print(f"tokenizer saved to {args.save_tokenizer}")
        return 0

    import torch

    if args.kv_cache is None:
        args.kv_cache = "static" if args.smoke else "auto"
    if args.smoke:
        device, dtype = torch.device("cpu"), torch.float32
        args.prompt_tokens = min(args.prompt_tokens, 200)
        args.repeats, args.edits, args.new_tokens = 1, min(args.edits, 2), min(args.new_tokens, 4)
        args.timeout = min(args.timeout, 10.0)
        torch.set_num_threads(1)
    else:
        if not torch.cuda.is_available():
            raise SystemExit("this benchmark needs CUDA (use --smoke for a CPU run check)")
        device, dtype = torch.device("cuda"), torch.bfloat16
    tokenizer = load_tokenizer(args)
    prefix = build_prompt(tokenizer, args.prompt_tokens)
    prompt_ids = tokenizer.encode(prefix, add_special_tokens=False)
    import transformers

    print(
        f"device {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}; prompt {len(prompt_ids)} tokens ending in 'np.', "
        f"{args.new_tokens} new tokens, kv cache {args.kv_cache}",
        flush=True,
    )
    figures = {}
    for name in args.models.split(","):
        model = build_model(name, tokenizer, device, dtype, args.smoke, args.seed)
        parameters = sum(p.numel() for p in model.parameters())
        print(f"model {name}: Qwen2 {parameters / 1e9:.2f}B parameters, {dtype}", flush=True)
        eager_ms = generate_ms_per_token(model, prompt_ids, args.new_tokens, args.repeats, False, device)
        print(f"  transformers generate, eager DynamicCache {eager_ms:8.2f} ms per token", flush=True)
        static_ms = generate_ms_per_token(model, prompt_ids, args.new_tokens, args.repeats, True, device)
        print(f"  transformers generate, static cache       {static_ms:8.2f} ms per token", flush=True)
        lm = make_lm(model, tokenizer, args.kv_cache, device)
        path = "static" if getattr(lm, "static", False) else "dynamic"
        graphs = getattr(lm, "cuda_graphs", False)
        print(
            f"  ours: {type(lm).__name__}, {path} cache, CUDA graphs {'on' if graphs and path == 'static' else 'off'}"
        )
        began = time.perf_counter()
        lm.warm_up(SERVER_PROMPT_TOKENS, args.new_tokens)  # as the server does at load
        ready = sorted(rows for buffers in getattr(lm, "_buffers", {}).values() for rows in buffers.graphs)
        print(f"  warm-up (graph capture, rows {ready}): {time.perf_counter() - began:.1f} s", flush=True)
        rows, constrained_ms = decoder_rows(
            lm, prompt_ids, prefix, args.new_tokens, args.repeats, args.seed, args.timeout
        )
        walls, calls = service_rows(lm, prefix, args.new_tokens, args.seed, args.edits, args.timeout)
        ratios = [wall * 1e3 / (max(1, count) * static_ms) for wall, count in zip(walls, calls)]
        print(
            f"  CompletionService over {len(walls)} edits: p50 {1e3 * percentile(walls, 0.5):.0f} ms, "
            f"p95 {1e3 * percentile(walls, 0.95):.0f} ms, LM calls p50 {statistics.median(calls):.0f}, "
            f"wall / (LM calls x static ms) p50 {statistics.median(ratios):.2f}",
            flush=True,
        )
        figures[name] = {
            "ratio": rows["adaptrack"][0] / static_ms,
            "service_ratio": statistics.median(ratios),
            "constrained_16_ms": constrained_ms,
        }
        print(
            f"  {name}: ratio {figures[name]['ratio']:.2f} (goal <= 1.2), service_ratio "
            f"{figures[name]['service_ratio']:.2f} (goal <= 1.5), constrained_16_ms {constrained_ms:.0f} (goal <= 250)",
            flush=True,
        )
        del lm, model
        if device.type == "cuda":
            torch.cuda.empty_cache()

    def figure(model: str, key: str, digits: int) -> str:
        return f"{figures[model][key]:.{digits}f}" if model in figures else "nan"

    print(
        f"ratio_1_5b={figure('1_5b', 'ratio', 3)} ratio_7b={figure('7b', 'ratio', 3)} "
        f"service_ratio_7b={figure('7b', 'service_ratio', 3)} constrained_16_ms_7b={figure('7b', 'constrained_16_ms', 1)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
