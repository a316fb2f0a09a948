"""Interpolated modified Kneser–Ney n-gram tables over token ids, built and queried with numpy.

Owns the counting (`build_tables`), the full next-token distribution of a context
(`NGramTables.distribution`) and the tables' on-disk form (one ``.npy`` per array, loaded
memory-mapped, so a load reads only the pages a query touches).

The model (Chen & Goodman 1999, "modified" KN with three discounts per order):

    p_k(w | c) = max(n_k(c, w) - D_k(n_k(c, w)), 0) / S_k(c) + gamma_k(c) * p_{k-1}(w | c')

where `c'` drops the first token of `c`; `n_N` is the raw count at the highest order
and `n_k` (k < N) the continuation count (how many distinct tokens precede ``c w``);
`S_k(c)` sums `n_k(c, .)`; `gamma_k(c)` is the mass the discounts (and pruned entries) free;
`p_1` interpolates with the uniform distribution, so every token has probability > 0.
An unseen context leaves the lower order's distribution as it is.

Storage: per order k >= 2, contexts are 64-bit hashes of their k-1 tokens (sorted, with
offsets into the entries), each with its backoff weight; each entry is a next token and
its discounted probability.  N-grams seen once are pruned from `prune_from` on (their
mass goes to the backoff weight), which keeps the tables a few bytes per corpus token.
Hash collisions: with 64-bit hashes and tens of millions of contexts the expected number
of colliding pairs is about 1e-5.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_MASK = (1 << 64) - 1
_M1, _M2, _M3 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_U64 = np.uint64


def mix(state: int, token: int) -> int:
    """The hash of a token sequence extended on the left by `token` (Python ints)."""
    h = ((state ^ (token + 1)) * _M1) & _MASK
    h ^= h >> 31
    h = (h * _M2) & _MASK
    h ^= h >> 29
    h = (h * _M3) & _MASK
    return h ^ (h >> 32)


def mix_array(state: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """`mix` over arrays (uint64 arithmetic wraps like the masked Python ints)."""
    with np.errstate(over="ignore"):
        h = (state ^ (tokens.astype(_U64) + _U64(1))) * _U64(_M1)
        h ^= h >> _U64(31)
        h *= _U64(_M2)
        h ^= h >> _U64(29)
        h *= _U64(_M3)
        h ^= h >> _U64(32)
    return h


def context_hashes(context: Sequence[int], count: int) -> list[int]:
    """Hashes of the last 1..`count` tokens of `context` (fewer when it is shorter)."""
    hashes, state = [], 0
    for token in reversed(context[len(context) - count :] if count else []):
        state = mix(state, int(token))
        hashes.append(state)
    return hashes


@dataclass
class OrderTable:
    """The entries of one order k >= 2: contexts of k-1 tokens and their next tokens."""

    context_hash: np.ndarray  # uint64[C], sorted
    offsets: np.ndarray  # uint32/int64[C + 1]: entries of context i are offsets[i]:offsets[i+1]
    backoff: np.ndarray  # float32[C]: gamma(c)
    next_token: np.ndarray  # uint16/int32[E]
    next_prob: np.ndarray  # float32[E]: discounted n(c, w) / S(c)

    ARRAYS = ("context_hash", "offsets", "backoff", "next_token", "next_prob")

    def check(self, order: int, vocab_size: int) -> None:
        """Raise ValueError when the arrays are inconsistent (a damaged file)."""
        contexts, entries = len(self.context_hash), len(self.next_token)
        if len(self.offsets) != contexts + 1 or len(self.backoff) != contexts or len(self.next_prob) != entries:
            raise ValueError(f"order {order}: array lengths disagree")
        if contexts and (int(self.offsets[0]) != 0 or int(self.offsets[-1]) != entries):
            raise ValueError(f"order {order}: offsets do not cover the entries")
        if entries and int(self.next_token[-1]) >= vocab_size:
            raise ValueError(f"order {order}: a token id is outside the vocabulary")


@dataclass
class NGramTables:
    """Modified Kneser–Ney tables of orders 1..`order` over `vocab_size` token ids."""

    order: int
    vocab_size: int
    unigram: np.ndarray  # float64[V]: p_1, interpolated with the uniform distribution
    tables: dict[int, OrderTable]  # order k (2..N) -> table
    discounts: dict[int, list[float]]  # order -> [D1, D2, D3+]

    def distribution(self, context: Sequence[int]) -> np.ndarray:
        """P(next token | context) as float64[vocab_size], normalised, every entry > 0."""
        return self.distribution_and_match(context)[0]

    def distribution_and_match(self, context: Sequence[int]) -> tuple[np.ndarray, int]:
        """`distribution`, and how many tokens of the context the tables had seen (the
        longest context whose continuations are stored)."""
        probs = self.unigram.copy()
        matched = 0
        for length, state in enumerate(context_hashes(context, self.order - 1), start=1):
            table = self.tables[length + 1]
            index = int(np.searchsorted(table.context_hash, _U64(state)))
            if index >= len(table.context_hash) or int(table.context_hash[index]) != state:
                break  # an unseen context: no longer one was seen either
            start, end = int(table.offsets[index]), int(table.offsets[index + 1])
            probs *= float(table.backoff[index])
            probs[table.next_token[start:end]] += table.next_prob[start:end]
            matched = length
        return probs, matched

    # -- files ---------------------------------------------------------------------------
    def save(self, folder: Path) -> list[str]:
        """Write the tables as .npy files into `folder`; returns the file names."""
        names = []
        np.save(folder / "unigram.npy", self.unigram)
        names.append("unigram.npy")
        for k, table in self.tables.items():
            for array_name in OrderTable.ARRAYS:
                name = f"order{k}.{array_name}.npy"
                np.save(folder / name, getattr(table, array_name))
                names.append(name)
        meta = {"order": self.order, "vocab_size": self.vocab_size, "discounts": {str(k): v for k, v in self.discounts.items()}}
        (folder / "ngram.json").write_text(json.dumps(meta, indent=1) + "\n")
        return [*names, "ngram.json"]

    @classmethod
    def load(cls, folder: Path, mmap: bool = True) -> NGramTables:
        """Tables saved by `save`; raises ValueError (or OSError) when they are damaged."""
        meta = json.loads((folder / "ngram.json").read_text())
        order, vocab_size = int(meta["order"]), int(meta["vocab_size"])
        mode = "r" if mmap else None
        unigram = np.load(folder / "unigram.npy", mmap_mode=mode, allow_pickle=False)
        if unigram.shape != (vocab_size,):
            raise ValueError(f"unigram has shape {unigram.shape}, expected ({vocab_size},)")
        tables = {}
        for k in range(2, order + 1):
            arrays = {
                name: np.load(folder / f"order{k}.{name}.npy", mmap_mode=mode, allow_pickle=False)
                for name in OrderTable.ARRAYS
            }
            table = OrderTable(**arrays)
            table.check(k, vocab_size)
            tables[k] = table
        discounts = {int(k): list(v) for k, v in meta["discounts"].items()}
        return cls(order, vocab_size, np.asarray(unigram, dtype=np.float64), tables, discounts)

    @property
    def nbytes(self) -> int:
        return int(self.unigram.nbytes) + sum(
            int(getattr(t, name).nbytes) for t in self.tables.values() for name in OrderTable.ARRAYS
        )

    @property
    def entries(self) -> int:
        return len(self.unigram) + sum(len(t.next_token) for t in self.tables.values())


# -- building ----------------------------------------------------------------------------
def _discounts(counts: np.ndarray) -> list[float]:
    """Modified KN discounts D1, D2, D3+ from count-of-counts (Chen & Goodman eq. 26)."""
    n = [int(np.count_nonzero(counts == i)) for i in range(1, 5)]
    if min(n) == 0:  # tiny corpora: fall back to the usual constant discount
        return [0.5, 1.0, 1.5]
    y = n[0] / (n[0] + 2 * n[1])
    values = [1 - 2 * y * n[1] / n[0], 2 - 3 * y * n[2] / n[1], 3 - 4 * y * n[3] / n[2]]
    return [float(min(max(d, 0.05), i + 1)) for i, d in enumerate(values)]


def _discounted(counts: np.ndarray, discounts: list[float]) -> np.ndarray:
    table = np.asarray([0.0, *discounts], dtype=counts.dtype if counts.dtype.kind == "f" else np.float64)
    return np.maximum(counts - table[np.minimum(counts, 3).astype(np.int64)], 0.0)


def build_tables(
    tokens: np.ndarray,
    counted: np.ndarray,
    order: int,
    vocab_size: int,
    prune_from: int = 3,
    progress: Callable[[int], None] | None = None,
) -> NGramTables:
    """Count the n-grams of `tokens` that end at positions where `counted` is True.

    `tokens` is one long sequence (documents separated by `order - 1` padding tokens,
    see `builtin.py`); `counted[i]` says whether the token at i is a prediction to count
    (False for padding).  Every counted position needs `order - 1` tokens before it.
    `progress(k)` is called after order k is done.  Memory: about 50 bytes per token at
    the peak (hash arrays and sorting), freed before returning.
    """
    if order < 2:
        raise ValueError("order must be at least 2")
    tokens = np.asarray(tokens)
    counted = np.asarray(counted, dtype=bool)
    length = len(tokens)
    if len(counted) != length:
        raise ValueError("tokens and counted differ in length")
    first_counted = int(np.argmax(counted)) if counted.any() else -1
    if first_counted < 0:
        raise ValueError("no tokens to count")
    if first_counted < order - 1:
        raise ValueError(f"every counted token needs {order - 1} tokens before it")
    if int(tokens.max()) >= vocab_size:
        raise ValueError("a token id is outside the vocabulary")
    token_dtype = np.uint16 if vocab_size <= 1 << 16 else np.int32
    padding = ~counted

    tables: dict[int, OrderTable] = {}
    discounts: dict[int, list[float]] = {}
    unigram = np.full(vocab_size, 1.0 / vocab_size)
    # the hash of the k tokens ending at each position, built by extending to the left
    previous = np.zeros(length, dtype=_U64)  # k - 1 = 0: the empty sequence
    pending = None  # order k - 1: (k-gram hashes, context hashes, tokens, raw counts)
    for k in range(1, order + 1):
        current = np.zeros(length, dtype=_U64)
        current[k - 1 :] = mix_array(previous[k - 1 :], tokens[: length - k + 1])
        keys = np.where(padding, _U64(0), current)  # 0 stands for "not counted"
        unique, first, raw = np.unique(keys, return_index=True, return_counts=True)
        del keys
        if padding.any() and unique[0] == 0:
            unique, first, raw = unique[1:], first[1:], raw[1:]
        raw = raw.astype(np.int32)
        if pending is not None:
            # continuation counts of order k - 1: how many distinct k-grams end with each
            # (k-1)-gram, i.e. how many distinct tokens precede it
            suffixes, continuations = np.unique(previous[first], return_counts=True)
            lower_hash, lower_context, lower_token, lower_raw = pending
            pending = None
            counts = np.zeros(len(lower_hash), dtype=np.int32)
            counts[np.searchsorted(lower_hash, suffixes)] = continuations
            del suffixes, continuations, lower_hash
            _finish(k - 1, lower_context, lower_token, counts, lower_raw, vocab_size, prune_from, token_dtype, tables, discounts, unigram)
            del lower_context, lower_token, lower_raw, counts
            if progress is not None:
                progress(k - 1)
        context = np.zeros(len(first), dtype=_U64) if k == 1 else previous[first - 1]
        pending = (unique, context, tokens[first].astype(token_dtype), raw)
        del first, context
        previous = current
        del current
    del previous
    _hash, context, token, raw = pending
    del pending, _hash
    _finish(order, context, token, raw, raw, vocab_size, prune_from, token_dtype, tables, discounts, unigram)
    if progress is not None:
        progress(order)
    return NGramTables(order, vocab_size, unigram, tables, discounts)


def _finish(
    k: int,
    context: np.ndarray,
    token: np.ndarray,
    counts: np.ndarray,
    raw: np.ndarray,
    vocab_size: int,
    prune_from: int,
    token_dtype,
    tables: dict[int, OrderTable],
    discounts: dict[int, list[float]],
    unigram: np.ndarray,
) -> None:
    """Discount the counts of order `k` and store its table (order 1 fills `unigram`)."""
    discounts[k] = _discounts(counts)
    if k == 1:
        discounted = _discounted(counts.astype(np.float64), discounts[k])
        total = float(counts.sum())
        unigram[:] = (1.0 - discounted.sum() / total) / vocab_size
        np.add.at(unigram, token.astype(np.int64), discounted / total)
        return
    by_context = np.argsort(context, kind="stable")
    context = context[by_context]
    new_group = np.empty(len(context), dtype=bool)
    new_group[0] = True
    np.not_equal(context[1:], context[:-1], out=new_group[1:])
    starts = np.flatnonzero(new_group)
    context_hash = context[starts]
    del context
    group = (np.cumsum(new_group) - 1).astype(np.int32)
    del new_group
    counts = counts[by_context]
    totals = np.add.reduceat(counts.astype(np.int64), starts).astype(np.float64)
    probability = (_discounted(counts.astype(np.float32), discounts[k]) / totals[group]).astype(np.float32)
    del counts, totals
    keep = raw[by_context] >= 2 if k >= prune_from else np.ones(len(group), dtype=bool)
    token = token[by_context][keep]
    del by_context
    probability = probability[keep]
    group = group[keep]
    del keep
    kept_mass = np.bincount(group, weights=probability, minlength=len(starts))
    entry_counts = np.bincount(group, minlength=len(starts))
    has_entries = entry_counts > 0
    offsets = np.zeros(int(has_entries.sum()) + 1, dtype=np.uint32 if len(token) < 1 << 32 else np.int64)
    np.cumsum(entry_counts[has_entries], out=offsets[1:])
    tables[k] = OrderTable(
        context_hash=context_hash[has_entries],
        offsets=offsets,
        backoff=np.maximum(1.0 - kept_mass[has_entries], 0.0).astype(np.float32),
        next_token=token.astype(token_dtype),
        next_prob=probability,
    )
