"""parso's disk cache after a process was killed while writing it: a truncated pickle is
a miss, not an error, and a save that fails half-way leaves the previous file whole; its
module cache in memory is released when the index is idle."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import jedi
import parso
import parso.cache as parso_cache

from adaptrack_lsp.apis.index import path_exists
from adaptrack_lsp.apis.parso_disk_cache import make_crash_safe

from api_index_support import venv_index


def _cache_files(cache_dir: Path) -> list[Path]:
    return sorted(path for path in cache_dir.rglob("*.pkl") if not path.name.startswith(".partial-"))


def _parsed_once(tmp_path: Path, text: str) -> tuple[Path, Path, Path]:
    """(source, cache folder, its one cache file) after parsing `text` with the disk cache."""
    assert make_crash_safe()
    source = tmp_path / "module.py"
    source.write_text(text)
    cache_dir = tmp_path / "cache"
    parso_cache.parser_cache.clear()  # jedi holds this very dict: emptied, not replaced
    parso.load_grammar().parse(path=source, cache=True, cache_path=cache_dir)
    [pickled] = _cache_files(cache_dir)
    return source, cache_dir, pickled


def test_plain_parso_fails_on_a_truncated_cache_file(tmp_path):
    """The failure being guarded against, in a process where nothing is installed."""
    source = tmp_path / "module.py"
    source.write_text("def f():\n    return 1\n")
    script = textwrap.dedent(
        f"""
        import gc, pathlib, parso, parso.cache as cache
        source, cache_dir = pathlib.Path({str(source)!r}), pathlib.Path({str(tmp_path / 'cache')!r})
        parso.load_grammar().parse(path=source, cache=True, cache_path=cache_dir)
        for pickled in cache_dir.rglob('*.pkl'):
            pickled.write_bytes(pickled.read_bytes()[:7])
        cache.parser_cache.clear()
        parso.load_grammar().parse(path=source, cache=True, cache_path=cache_dir)
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and ("EOFError" in run.stderr or "UnpicklingError" in run.stderr), run.stderr


def test_truncated_cache_file_is_parsed_again_and_rewritten(tmp_path):
    source, cache_dir, pickled = _parsed_once(tmp_path, "def f():\n    return 1\n")
    pickled.write_bytes(pickled.read_bytes()[:7])
    parso_cache.parser_cache.clear()

    module = parso.load_grammar().parse(path=source, cache=True, cache_path=cache_dir)

    assert module.children[0].name.value == "f"
    with pickled.open("rb") as file:  # written whole again
        assert pickle.load(file).node.children[0].name.value == "f"


class _FailsHalfWay:
    def __reduce__(self):
        raise RuntimeError("killed while pickling")


def test_a_save_that_fails_half_way_leaves_the_previous_file_whole(tmp_path):
    source, cache_dir, pickled = _parsed_once(tmp_path, "x = 1\n")
    before = pickled.read_bytes()
    hashed = parso.load_grammar()._hashed

    try:
        parso_cache._save_to_file_system(hashed, source, ["a large item", _FailsHalfWay()], cache_path=cache_dir)
    except RuntimeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("the failing pickle did not raise")

    assert pickled.read_bytes() == before
    assert [path.name for path in cache_dir.rglob(".partial-*")] == []


def test_index_answers_through_a_truncated_jedi_cache(tmp_path, monkeypatch):
    """The whole path: jedi's disk cache broken under the index, the index still answers."""
    jedi_cache = tmp_path / "jedi"
    monkeypatch.setattr(jedi.settings, "cache_directory", str(jedi_cache))
    parso_cache.parser_cache.clear()  # jedi holds this very dict: emptied, not replaced
    first = venv_index(runtime_introspection=False)
    assert path_exists(first, ("json", "dumps")) is True
    broken = _cache_files(jedi_cache)
    assert broken, "jedi wrote no cache files"
    for pickled in broken:
        pickled.write_bytes(b"")
    parso_cache.parser_cache.clear()

    second = venv_index(runtime_introspection=False)

    assert path_exists(second, ("json", "encoder", "JSONEncoder")) is True
    assert path_exists(second, ("json", "encoder", "no_such_class")) is False
    assert any(path.stat().st_size > 0 for path in _cache_files(jedi_cache)), "nothing was parsed again"


#: run in a process of its own: the indexes earlier tests left in this one keep look-up
#: threads (and parso's process-wide cache) busy on their own clocks
IDLE_SCENARIO = """
import sys, time
sys.path.insert(0, sys.argv[1])
import parso.cache as parso_cache
from adaptrack_lsp.apis import jedi_index
from adaptrack_lsp.apis.index import path_exists
from api_index_support import venv_index

def held():
    return sum(len(modules) for modules in parso_cache.parser_cache.values())

jedi_index.IDLE_RELEASE_S = 2.0
index = venv_index(runtime_introspection=False)
assert path_exists(index, ("json", "dumps")) is True
assert held() > 0, "nothing parsed"
started = time.monotonic()
while held() and time.monotonic() < started + 30:
    time.sleep(0.1)
print(f"released after {time.monotonic() - started:.1f} s" if not held() else "never released")
assert held() == 0
assert path_exists(index, ("json", "encoder", "JSONEncoder")) is True
assert path_exists(index, ("json", "encoder", "no_such_class")) is False
index.close()
"""


def test_parsed_modules_are_released_when_the_index_is_idle():
    """The parse trees jedi read stay for the look-ups of a burst and are released once
    none came for `IDLE_RELEASE_S` (2 s here); the index answers after it as before."""
    done = subprocess.run(
        [sys.executable, "-c", IDLE_SCENARIO, str(Path(__file__).resolve().parent)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seconds = float(done.stdout.split("released after ")[1].split(" s")[0])
    assert 1.5 <= seconds < 10, done.stdout  # the idle time, not the burst's
