"""Evaluation metrics: EM@k (paper eq. 5), LM-call statistics, latency, KL divergence.

- `em_at_k(n, c, k)`: the unbiased estimator 1 - C(n-c, k) / C(n, k) of "at least one of
  k attempts matches", from n samples of which c match (paper eq. 5, Chen et al. 2021).
- `call_statistics`: paper Table 5 — per item the mean, min and max LM calls per sample,
  then each averaged over items.
- `kl_divergence(samples, exact)`: D_KL(Q || P(.|c)) of the empirical distribution Q of
  `samples` against an exact distribution; `sliding_window_kl` is paper Figure 4.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

#: the k of paper Tables 1 and 2
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20)


def em_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(some of k draws matches) from n draws with c matches.

    Equals 1 - C(n-c, k) / C(n, k), computed as a stable product.  Raises ValueError when
    k > n (the estimator is undefined) or c is outside [0, n].
    """
    if n < 1 or k < 1:
        raise ValueError(f"EM@k needs n >= 1 and k >= 1 (got n={n}, k={k})")
    if k > n:
        raise ValueError(f"EM@{k} is undefined from {n} samples (k must be <= n)")
    if not 0 <= c <= n:
        raise ValueError(f"match count {c} is outside [0, {n}]")
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def em_table(
    greedy_matches: Sequence[bool | None],
    sample_matches: Sequence[Sequence[bool]],
    ks: Iterable[int] = DEFAULT_KS,
) -> dict[str, float | None]:
    """EM@k averaged over items, as fractions in [0, 1].

    EM@1 is the share of items whose greedy prediction matches (paper §6.1: "For EM@1,
    we use the greedy result"); when no greedy run exists (None entries), EM@1 falls back
    to the estimator over the samples — the report says which was used.  EM@k for k > 1
    uses eq. 5 over each item's samples; k larger than an item's sample count gives None.
    """
    ks = list(ks)
    result: dict[str, float | None] = {}
    items = len(sample_matches)
    if items == 0:
        return {f"EM@{k}": None for k in ks}
    for k in ks:
        if k == 1 and all(g is not None for g in greedy_matches) and len(greedy_matches) == items:
            result["EM@1"] = float(np.mean([bool(g) for g in greedy_matches]))
            continue
        values = []
        for matches in sample_matches:
            n = len(matches)
            if k > n:
                values = None
                break
            values.append(em_at_k(n, sum(bool(m) for m in matches), k))
        result[f"EM@{k}"] = None if values is None else float(np.mean(values))
    return result


def call_statistics(calls_per_item: Sequence[Sequence[int]]) -> dict[str, float | None]:
    """Paper Table 5: avg = mean over items of the mean calls per sample; min/max = the
    per-item minimum/maximum, averaged over items."""
    per_item = [list(c) for c in calls_per_item if len(c)]
    if not per_item:
        return {"avg": None, "min": None, "max": None, "total": 0}
    return {
        "avg": float(np.mean([np.mean(c) for c in per_item])),
        "min": float(np.mean([min(c) for c in per_item])),
        "max": float(np.mean([max(c) for c in per_item])),
        "total": int(sum(sum(c) for c in per_item)),
    }


def latency_statistics(milliseconds: Sequence[float]) -> dict[str, float | None]:
    """Mean and percentiles (p50, p90, p99) of per-decode wall time in milliseconds."""
    values = np.asarray(list(milliseconds), dtype=np.float64)
    if values.size == 0:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "count": 0}
    return {
        "mean": float(values.mean()),
        "p50": float(np.percentile(values, 50)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "count": int(values.size),
    }


def empirical_distribution(samples: Iterable[Hashable]) -> dict[Hashable, float]:
    counts = Counter(samples)
    total = sum(counts.values())
    if total == 0:
        raise ValueError("no samples")
    return {s: c / total for s, c in counts.items()}


def kl_divergence(samples: Iterable[Hashable], exact: Mapping[Hashable, float]) -> float:
    """D_KL(Q || P) in nats, Q the empirical distribution of `samples`, P = `exact`.

    A sample outside the support of P (an invalid sequence) makes the divergence +inf.
    """
    q = empirical_distribution(samples)
    total = 0.0
    for s, qs in q.items():
        p = exact.get(s, 0.0)
        if p <= 0.0:
            return math.inf
        total += qs * math.log(qs / p)
    return float(total)


def sliding_window_kl(
    samples: Sequence[Hashable], exact: Mapping[Hashable, float], window: int | None = None
) -> list[float]:
    """KL of samples[x : x + window] for x = 0 .. len - window (paper Figure 4).

    `window` defaults to a quarter of the samples (at least 1).
    """
    samples = list(samples)
    if not samples:
        return []
    window = max(1, len(samples) // 4) if window is None else int(window)
    if not 1 <= window <= len(samples):
        raise ValueError(f"window {window} must be in [1, {len(samples)}]")
    return [kl_divergence(samples[x : x + window], exact) for x in range(len(samples) - window + 1)]
