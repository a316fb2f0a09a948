"""The test model ``tiny`` and a large local tokenizer, both built offline and cached
(the offline model users get is ``builtin``, `builtin.py`).

``tiny`` is a byte-level BPE tokenizer trained on a fixed, sorted subset of the Python
standard library's sources and a 2-layer Llama with seeded random weights.  It is saved
with ``save_pretrained`` (safetensors) under the cache directory and loaded through the
same ``from_pretrained`` path as any user model (`lm.loading.load_model("tiny")`).  It gives
no useful completions; it makes the server, the CLI and the tests run end to end with
real tokenization and a real transformer without any download.

`build_large_tokenizer` builds a byte-level BPE with a Qwen2-sized vocabulary (>= 100k
tokens) directly from identifier and word fragments of the standard library, for
constraint-mask tests and benchmarks at realistic vocabulary sizes.

Cache directory: `config.cache_root()` (``$ADAPTRACK_CACHE``, else
``$XDG_CACHE_HOME/adaptrack-lsp``, else ``~/.cache/adaptrack-lsp``); each artifact lives in a folder named by a hash of its recipe.
Builds happen in a temporary folder renamed into place under a file lock, so concurrent
first uses build once and never see a half-written folder.
"""

from __future__ import annotations

import json
import sysconfig
from collections import Counter
from pathlib import Path

from adaptrack_lsp.cache import cached_build, recipe_key

TINY_NAME = "tiny"

#: every input of the tiny model; changing any value changes the cache folder
TINY_RECIPE = {
    "recipe": 1,
    "tokenizer_vocab_size": 6000,
    "corpus_bytes": 2_500_000,
    "hidden_size": 192,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "max_position_embeddings": 4096,
    "initializer_range": 0.1,
    "logits_multiple": 64,
    "seed": 1234,
}

#: special tokens of the tiny model and the large tokenizer (Qwen2.5-Coder layout)
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
]

LARGE_TOKENIZER_RECIPE = {"recipe": 1, "corpus_bytes": 14_000_000, "max_fragment_chars": 24}


# -- corpus -------------------------------------------------------------------------------
def stdlib_sources(max_bytes: int) -> list[str]:
    """Texts of the standard library's .py files in sorted path order, up to `max_bytes`."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(
        p
        for p in stdlib.rglob("*.py")
        if "site-packages" not in p.parts and "dist-packages" not in p.parts
    )
    texts, total = [], 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(text)
        total += len(text.encode("utf-8"))
        if total >= max_bytes:
            break
    if not texts:
        raise RuntimeError(f"no Python sources found under {stdlib} to build a tokenizer from")
    return texts


def _wrap_tokenizer(tokenizer_object, model_max_length: int):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer_object,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t != "<|endoftext|>"],
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


# -- tiny model ---------------------------------------------------------------------------
def _train_tiny_tokenizer(recipe: dict):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe["tokenizer_vocab_size"],
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(stdlib_sources(recipe["corpus_bytes"]), trainer=trainer)
    return tokenizer


def _build_tiny(folder: Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    recipe = TINY_RECIPE
    tokenizer = _wrap_tokenizer(_train_tiny_tokenizer(recipe), recipe["max_position_embeddings"])
    count = len(tokenizer)
    multiple = recipe["logits_multiple"]
    logits_size = -(-count // multiple) * multiple  # padded like real models: ids >= count are invalid
    eos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = LlamaConfig(
        vocab_size=logits_size,
        hidden_size=recipe["hidden_size"],
        intermediate_size=recipe["intermediate_size"],
        num_hidden_layers=recipe["num_hidden_layers"],
        num_attention_heads=recipe["num_attention_heads"],
        num_key_value_heads=recipe["num_key_value_heads"],
        max_position_embeddings=recipe["max_position_embeddings"],
        initializer_range=recipe["initializer_range"],
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )
    generator_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(recipe["seed"])
        model = LlamaForCausalLM(config).to(torch.float32).eval()
    finally:
        torch.random.set_rng_state(generator_state)
    model.generation_config = GenerationConfig(
        eos_token_id=[eos_id, tokenizer.convert_tokens_to_ids("<|file_sep|>")], pad_token_id=eos_id
    )
    from transformers.utils import logging as transformers_logging

    bars_were_disabled = transformers_logging.is_progress_bar_enabled() is False
    transformers_logging.disable_progress_bar()
    try:
        model.save_pretrained(folder, safe_serialization=True)
    finally:
        if not bars_were_disabled:
            transformers_logging.enable_progress_bar()
    tokenizer.save_pretrained(folder)
    (folder / "adaptrack-recipe.json").write_text(json.dumps(recipe, indent=2, sort_keys=True) + "\n")


def tiny_model_path() -> Path:
    """Folder of the built-in tiny model (built on first use, < a minute; needs the
    transformers extra: ModelError naming its install command otherwise)."""
    from adaptrack_lsp.completion.lm.base import ModelError
    from adaptrack_lsp.extras import MissingExtra, require

    try:
        require("transformers", "model 'tiny'")
    except MissingExtra as error:
        raise ModelError(str(error)) from None
    return cached_build(recipe_key("tiny", TINY_RECIPE, with_torch=True), _build_tiny, marker="adaptrack-recipe.json")


# -- large tokenizer ----------------------------------------------------------------------
def _build_large_tokenizer(folder: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from adaptrack_lsp.completion.tokenizer_bytes import bytes_to_unicode

    recipe = LARGE_TOKENIZER_RECIPE
    splitter = pre_tokenizers.ByteLevel(add_prefix_space=False)
    counts: Counter[str] = Counter()
    for text in stdlib_sources(recipe["corpus_bytes"]):
        counts.update(piece for piece, _ in splitter.pre_tokenize_str(text) if len(piece) <= recipe["max_fragment_chars"])

    base_size = vocab_size - len(SPECIAL_TOKENS)
    alphabet = sorted(bytes_to_unicode().values(), key=lambda c: ord(c))
    vocab: dict[str, int] = {char: i for i, char in enumerate(alphabet)}
    merges: list[tuple[str, str]] = []
    # every prefix of a frequent fragment becomes a token, merged left to right
    for fragment, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if len(vocab) >= base_size:
            break
        for end in range(2, len(fragment) + 1):
            prefix = fragment[:end]
            if prefix in vocab:
                continue
            if len(vocab) >= base_size:
                break
            vocab[prefix] = len(vocab)
            merges.append((fragment[: end - 1], fragment[end - 1]))
    if len(vocab) < base_size:
        raise RuntimeError(
            f"the local sources give only {len(vocab)} token fragments, fewer than the {base_size} asked for"
        )
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    wrapped = _wrap_tokenizer(tokenizer, model_max_length=32768)
    if len(wrapped) != vocab_size:
        raise RuntimeError(f"large tokenizer has {len(wrapped)} tokens, expected {vocab_size}")
    wrapped.save_pretrained(folder)
    (folder / "adaptrack-recipe.json").write_text(json.dumps({**recipe, "vocab_size": vocab_size}) + "\n")


def build_large_tokenizer(min_vocab: int = 120_000):
    """A byte-level BPE `PreTrainedTokenizerFast` with exactly `min_vocab` tokens (cached).

    Built from the standard library's identifier/word fragments (no download); the last
    tokens are Qwen2.5-Coder-style specials (``<|endoftext|>``, FIM markers, ...).
    Qwen2-sized: ``build_large_tokenizer(151_643)`` with 151,936 logits.
    """
    from transformers import PreTrainedTokenizerFast

    if min_vocab < 1000:
        raise ValueError(f"min_vocab must be at least 1000, got {min_vocab}")
    recipe = {**LARGE_TOKENIZER_RECIPE, "vocab_size": int(min_vocab)}
    folder = cached_build(
        recipe_key("large-tokenizer", recipe, with_torch=False),
        lambda tmp: _build_large_tokenizer(tmp, int(min_vocab)),
        marker="adaptrack-recipe.json",
    )
    return PreTrainedTokenizerFast.from_pretrained(str(folder))
