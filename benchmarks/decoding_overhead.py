"""Decoding overhead on a 0.5B-sized model: how much wall time goes outside the model's
forward passes, and how many tokens go through the network per tree node.

Model: a Qwen2 configuration the size of Qwen2.5-0.5B (hidden 896, 24 layers, 14 query /
2 key-value heads, intermediate 4864, 151,936 logits), random weights, CPU, fp32.
Tokenizer: `build_large_tokenizer(151_643)` (byte-level BPE built locally, cached).
Constraint: the API monitor over the installed numpy's public names (`StaticIndex`)
through `TokenIndex`, on a prompt of a few hundred tokens ending in ``np.``; generation
stops at the end of the line.  A random model puts its mass almost uniformly over the
vocabulary, so the constraint rejects nearly every token and AdapTrack backtracks.

Figures per decoder, measured in one run:
- `overhead`: share of the decode's wall time outside model forward passes, after the
  prompt pass (which would otherwise dominate and flatter the figure); the share over
  the whole decode (prompt included) is printed too.  Goal <= 5%.
- `fed_ratio`: tokens_fed / (prompt tokens + distinct non-root nodes evaluated).
  Goal <= 1.05.

Not timed: building the tokenizer, the model and the per-vocabulary constraint tables
(done once per process in the server).  Usage:
    python benchmarks/decoding_overhead.py [--prompt-tokens 300] [--samples 4] [--threads N]
    python benchmarks/decoding_overhead.py --smoke   # a one-layer model, 2k tokens (seconds)

Last line: ``overhead_adaptrack=... overhead_constrained=... fed_ratio_adaptrack=... fed_ratio_constrained=...``.
"""

from __future__ import annotations

import argparse
import time

PROMPT_BODY = '''import numpy as np


def standardise(values, axis=0):
    """Zero mean, unit variance along `axis`."""
    mean = np.mean(values, axis=axis, keepdims=True)
    spread = np.std(values, axis=axis, keepdims=True)
    return (values - mean) / np.where(spread == 0, 1.0, spread)


def pairwise_distances(points):
    squared = np.sum(points ** 2, axis=1)
    product = points @ points.T
    return np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * product, 0.0))


def low_rank(matrix, rank):
    u, s, vt = np.linalg.svd(matrix, full_matrices=False)
    return (u[:, :rank] * s[:rank]) @ vt[:rank]


'''


def numpy_names() -> list[str]:
    from adaptrack_lsp.apis.snapshot import module_snapshot

    return module_snapshot("numpy", ("linalg", "random", "fft", "polynomial", "ma", "char", "testing"))["names"]


def build_prompt(tokenizer, target_tokens: int) -> str:
    """A Python file of about `target_tokens` tokens ending in ``result = np.``."""
    text = PROMPT_BODY
    index = 0
    while len(tokenizer.encode(text, add_special_tokens=False)) < target_tokens - 10:
        text += (
            f"def feature_{index}(data):\n"
            f"    centred = data - np.mean(data, axis={index % 2})\n"
            f"    return np.linalg.norm(centred, ord={index % 3 + 1})\n\n\n"
        )
        index += 1
    return text + "points = np.random.default_rng(0).normal(size=(64, 3))\nresult = np."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--samples", type=int, default=4, help="samples per request")
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--layers", type=int, default=24, help="hidden layers (24 = 0.5B-sized)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="a one-layer model over a 2k-token vocabulary (a run check)")
    args = parser.parse_args()
    size = {"vocab": 151_643, "logits": 151_936, "hidden": 896, "intermediate": 4864, "heads": 14, "kv_heads": 2}
    if args.smoke:
        args.prompt_tokens, args.samples, args.max_new_tokens, args.layers = 60, 2, 3, 1
        size = {"vocab": 2000, "logits": 2048, "hidden": 64, "intermediate": 128, "heads": 4, "kv_heads": 2}

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from adaptrack_lsp.completion.decoders import DecodeRequest, get_decoder
    from adaptrack_lsp.completion.lm.hf import HFLanguageModel, vocabulary_for
    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer
    from adaptrack_lsp.constrainers.api import (
        ApiMonitor,
        ConstraintContext,
        StaticIndex,
    )
    from adaptrack_lsp.constrainers.token_index import TokenIndex, TokenTables

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    tokenizer = build_large_tokenizer(size["vocab"])
    eos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=size["logits"],
        hidden_size=size["hidden"],
        intermediate_size=size["intermediate"],
        num_hidden_layers=args.layers,
        num_attention_heads=size["heads"],
        num_key_value_heads=size["kv_heads"],
        max_position_embeddings=32768,
        rope_theta=1_000_000.0,
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=None,
        eos_token_id=eos_id,
    )
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    model = Qwen2ForCausalLM(config).to(torch.float32).eval()
    parameters = sum(p.numel() for p in model.parameters())
    build_seconds = time.perf_counter() - started
    vocab = vocabulary_for(model, tokenizer)
    TokenTables.of(vocab)  # per-vocabulary tables, built once per process

    prefix = build_prompt(tokenizer, args.prompt_tokens)
    prompt_ids = tokenizer.encode(prefix, add_special_tokens=False)
    monitor = ApiMonitor(StaticIndex(numpy_names(), source="numpy names"))
    context = ConstraintContext(document=prefix, prefix=prefix)
    print(
        f"model: Qwen2 {parameters / 1e6:.0f}M parameters ({args.layers} layers, hidden {size['hidden']}, "
        f"{size['heads']}/{size['kv_heads']} heads), "
        f"fp32 CPU, {torch.get_num_threads()} threads, built in {build_seconds:.1f} s"
    )
    print(f"vocabulary: {vocab.num_defined} tokens, {vocab.size} logits; prompt: {len(prompt_ids)} tokens ending in 'np.'")

    figures = {}
    for name in ("adaptrack", "constrained"):
        lm = HFLanguageModel(model, tokenizer, vocab=vocab)
        prompt_pass = {}
        original_set_prompt = lm.set_prompt

        def timed_set_prompt(*call_args, _original=original_set_prompt, _lm=lm, _record=prompt_pass, **kwargs):
            forward_before, begin = _lm.forward_seconds, time.perf_counter()
            info = _original(*call_args, **kwargs)
            _record["wall"] = _record.get("wall", 0.0) + time.perf_counter() - begin
            _record["forward"] = _record.get("forward", 0.0) + _lm.forward_seconds - forward_before
            return info

        lm.set_prompt = timed_set_prompt
        constraint = TokenIndex(monitor, vocab, context=context)
        request = DecodeRequest(
            prompt_ids=prompt_ids,
            num_samples=args.samples,
            temperature=1.0,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            stop=lambda text, checked=0: "\n" in text,
        )
        result = get_decoder(name).decode(lm, constraint, request)
        counters = result.counters
        wall, forward = counters.wall_seconds, lm.forward_seconds
        decode_wall = wall - prompt_pass["wall"]
        decode_forward = forward - prompt_pass["forward"]
        overhead = (decode_wall - decode_forward) / decode_wall
        overhead_total = (wall - forward) / wall
        nodes = counters.lm_calls - 1  # the root's distribution comes from the prompt pass
        fed_ratio = counters.tokens_fed / (len(prompt_ids) + nodes)
        figures[name] = (overhead, fed_ratio)
        texts = sorted({repr(s.text) for s in result.samples})
        print(
            f"{name}: status {result.status}, {len(result.samples)} samples {', '.join(texts[:4])}; "
            f"nodes {nodes}, backtracks {counters.backtracks}, constraint checks {counters.constraint_checks}, "
            f"tokens fed {counters.tokens_fed}"
        )
        print(
            f"{name}: wall {wall:.2f} s = prompt pass {prompt_pass['wall']:.2f} s + decoding {decode_wall:.2f} s; "
            f"forward passes during decoding {decode_forward:.2f} s ({lm.forward_calls - 1} calls, "
            f"{1e3 * decode_forward / max(1, lm.forward_calls - 1):.0f} ms each); constraint {counters.constraint_seconds:.3f} s"
        )
        wrapper = counters.lm_seconds - decode_forward  # next_logprobs time outside the network
        tree_and_decoder = decode_wall - counters.lm_seconds - counters.constraint_seconds
        print(
            f"{name}: outside forward passes: LM wrapper (cache moves, log-softmax) {wrapper:.2f} s, "
            f"constraint {counters.constraint_seconds:.2f} s, tree and decoder {tree_and_decoder:.2f} s"
        )
        print(
            f"{name}: time outside forward passes {100 * overhead:.2f}% of decoding "
            f"({100 * overhead_total:.2f}% including the prompt pass); "
            f"fed ratio {counters.tokens_fed}/({len(prompt_ids)}+{nodes}) = {fed_ratio:.4f}"
        )
    print(
        f"overhead_adaptrack={figures['adaptrack'][0]:.4f} overhead_constrained={figures['constrained'][0]:.4f} "
        f"fed_ratio_adaptrack={figures['adaptrack'][1]:.4f} fed_ratio_constrained={figures['constrained'][1]:.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
