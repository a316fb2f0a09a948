"""TimedCache: answers kept for STATUS_SECONDS, bounded."""

from adaptrack_lsp import timed_cache
from adaptrack_lsp.timed_cache import TimedCache


def test_an_answer_is_kept_then_computed_again(monkeypatch):
    cache: TimedCache[int] = TimedCache(8)
    calls = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert cache.get("k", compute) == 1
    assert cache.get("k", compute) == 1  # within STATUS_SECONDS: not computed again
    monkeypatch.setattr(timed_cache, "STATUS_SECONDS", 0.0)
    assert cache.get("k", compute) == 2


def test_a_full_cache_is_emptied():
    cache: TimedCache[str] = TimedCache(3)
    for key in range(10):
        cache.get(key, lambda key=key: str(key))
        assert len(cache) <= 3
    assert cache.get(9, lambda: "recomputed") == "9"
