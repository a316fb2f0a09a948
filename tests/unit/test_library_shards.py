"""Library shards of the built-in model (`completion/lm/shards.py`): where a project's
libraries are found (without running anything, never a workspace interpreter in an
untrusted workspace), which files a shard reads (no tests; large libraries sampled),
the cache (background builds with progress, one folder per version, damaged and
unwritable caches), the mixing (the shard after its library's alias, the base model
elsewhere), the members of a project class after a typed receiver, and the weight fit.

The base model is the small recipe of `test_builtin_model.py` (seconds); the library is
a fake package of a few files in a hand-made virtual environment whose ``bin/python`` is
not a program at all, so a test that finds the library shows that nothing ran.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from builtin_support import small_model_in_own_cache

from adaptrack_lsp.completion.lm import builtin
from adaptrack_lsp.completion.lm.shards import (
    LibraryHints,
    build_shard,
    fit_shard_weights,
    imported_modules,
    locate_library,
    project_environment,
    receiver_class,
    shard_files,
)

#: an API the standard library never writes, used the way docstrings and code use it
LIBRARY = {
    "__init__.py": '''"""Frames of zorbs.

>>> import zorblib as zl
>>> frame = zl.quantize_zorbs(data)
>>> zl.quantize_zorbs(frame, levels=4)
>>> zl.quantize_zorbs(frame, levels=8)
"""
from zorblib.core import ZorbFrame, quantize_zorbs
''',
    "core.py": '''import zorblib as zl


class ZorbFrame:
    def spin_zorbs(self):
        return zl.quantize_zorbs(self)


def quantize_zorbs(frame, levels=2):
    """>>> zl.quantize_zorbs(frame, levels=2)"""
    return frame


def helper(frame):
    return zl.quantize_zorbs(zl.quantize_zorbs(frame))
''',
    "tests/__init__.py": "",
    "tests/test_core.py": "import zorblib as zl\n\n\ndef test_quantize():\n    assert zl.quantize_zorbs(1) == 1\n",
    "conftest.py": "import pytest\n",
    "test_helpers.py": "def test_nothing():\n    pass\n",
}


def make_environment(folder: Path, version: str = "1.0", files: dict[str, str] = LIBRARY) -> str:
    """A virtual environment laid out by hand holding `zorblib` `version`: its
    ``bin/python`` is a text file (nothing can run it); returns its path."""
    site = folder / "lib" / "python3.11" / "site-packages"
    for name, text in files.items():
        path = site / "zorblib" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    set_version(site, version)
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    (folder / "bin" / "python").write_text("not a program\n")
    (folder / "pyvenv.cfg").write_text("home = /nowhere\ninclude-system-site-packages = false\n")
    return str(folder / "bin" / "python")


def set_version(site: Path, version: str) -> None:
    for old in site.glob("zorblib-*.dist-info"):
        for file in old.iterdir():
            file.unlink()
        old.rmdir()
    info = site / f"zorblib-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: zorblib\nVersion: {version}\nLicense-Expression: MIT\n")




@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    yield from small_model_in_own_cache(tmp_path_factory)


@pytest.fixture
def fresh_cache(small_model, tmp_path, monkeypatch):
    """The small model with a cache root of its own for shards (and a new manager)."""
    lm, _ = small_model
    monkeypatch.setenv("ADAPTRACK_CACHE", str(tmp_path / "cache"))
    lm._libraries = None
    yield lm
    lm._libraries = None
    lm.use_libraries(None)


# -- where the sources are ---------------------------------------------------------------------
def test_the_project_environment_is_read_without_running_an_interpreter(tmp_path):
    python = make_environment(tmp_path / "env")
    environment = project_environment(python, None, trusted=False)
    assert environment.problem == "" and environment.python == python
    assert environment.site_folders == (str(tmp_path / "env" / "lib" / "python3.11" / "site-packages"),)
    source = locate_library("zorblib", environment)
    assert (source.module, source.distribution, source.version, source.license) == ("zorblib", "zorblib", "1.0", "MIT")
    assert source.location == str(tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "zorblib")


def test_an_untrusted_workspace_never_gives_its_own_interpreter(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    workspace = tmp_path / "project"
    inside = make_environment(workspace / ".venv")
    untrusted = project_environment(None, str(workspace), trusted=False)
    assert untrusted.python == sys.executable and locate_library("zorblib", untrusted) is None
    trusted = project_environment(None, str(workspace), trusted=True)
    assert trusted.python == inside and locate_library("zorblib", trusted) is not None
    # an interpreter the user names is used, wherever it lies; its libraries inside the
    # workspace are still the user's project, never a corpus
    named = project_environment(inside, str(workspace), trusted=False)
    assert named.python == inside
    assert locate_library("zorblib", named) is not None
    assert locate_library("zorblib", named, workspace_root=str(workspace)) is None


def test_only_installed_distributions_outside_the_standard_library_get_shards(tmp_path, fresh_cache):
    python = make_environment(tmp_path / "env")
    environment = project_environment(python, None, False)
    site = Path(environment.site_folders[0])
    (site / "loose").mkdir()
    (site / "loose" / "__init__.py").write_text("x = 1\n")  # no .dist-info: not installed by a package manager
    (site / "json").mkdir()
    (site / "json" / "__init__.py").write_text("x = 1\n")
    assert locate_library("loose", environment) is None
    assert locate_library("json", environment) is None  # the standard library's name
    assert locate_library("missing", environment) is None
    # a library the base model's corpus holds at the same version gets none
    libraries = fresh_cache.libraries
    libraries.base_corpus["zorblib"] = "1.0"
    try:
        assert libraries.locate("zorblib", environment, None) is None
    finally:
        del libraries.base_corpus["zorblib"]
        libraries._located.clear()
    assert libraries.locate("zorblib", environment, None) is not None


def test_a_shard_reads_no_tests_and_samples_a_large_library(tmp_path):
    python = make_environment(tmp_path / "env")
    location = Path(locate_library("zorblib", project_environment(python, None, False)).location)
    chosen = shard_files(location)
    assert [p.relative_to(location).as_posix() for p in chosen.files] == ["__init__.py", "core.py"]
    assert chosen.tests_left_out == 4 and not chosen.sampled
    for number in range(40):
        (location / f"module_{number}.py").write_text(f"value_{number} = {'1' * 100}\n")
    recipe = {**builtin_shard_recipe(), "max_bytes": 2000}
    sampled = shard_files(location, recipe)
    sizes = [p.stat().st_size for p in sampled.files]
    assert sampled.sampled and sampled.candidates == 42 and 0 < sum(sizes) <= 2000
    assert len(sampled.files) < 42 and shard_files(location, recipe).files == sampled.files  # the same sample every time
    names = {p.name for p in sampled.files}
    assert {f"module_{n}.py" for n in range(0, 20)} & names and {f"module_{n}.py" for n in range(20, 40)} & names  # spread


def builtin_shard_recipe() -> dict:
    from adaptrack_lsp.completion.lm.shards import SHARD_RECIPE

    return dict(SHARD_RECIPE)


# -- building and the cache --------------------------------------------------------------------
def test_a_shard_is_built_in_the_background_once_per_version(tmp_path, fresh_cache):
    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    environment = lm.libraries.environment(python, None, False)
    heard: list[str] = []
    imports = {"zl": ("zorblib",), "os": ("os",)}
    # a one-shot command (the CLI) uses cached shards only: it starts no build
    assert dict(lm.prepare_libraries(imports=imports, python_path=python, build="never", progress=heard.append).shards) == {}
    assert lm.libraries.wait_idle(0) and heard == [] and not (tmp_path / "cache" / "builtin-shards").exists()
    hints = lm.prepare_libraries(imports=imports, python_path=python, progress=heard.append)
    assert dict(hints.shards) == {}  # not built yet: this request goes without
    assert lm.libraries.wait_idle(60)
    assert heard[0].startswith("learning zorblib 1.0 for the built-in model (first import): ") and heard[-1] == ""
    hints = lm.prepare_libraries(imports=imports, python_path=python)
    assert list(hints.shards) == ["zorblib"] and dict(hints.owners) == {"zl": "zorblib"} and hints.others == {"os"}
    assert hints.standard == {"os"}  # a standard-library module: the base model's place
    source = lm.libraries.locate("zorblib", environment, None)
    folder = lm.libraries.folder(source)
    assert folder.is_dir() and "zorblib-1.0" in folder.name
    manifest = lm.libraries.shard(source).manifest
    assert (manifest["files"], manifest["test_files_left_out"], manifest["version"]) == (2, 4, "1.0")

    lm._libraries = None  # a new process: found in the cache, not built
    assert list(lm.prepare_libraries(imports=imports, python_path=python).shards) == ["zorblib"]
    assert lm.libraries.built == {}

    set_version(Path(environment.site_folders[0]), "2.0")  # an upgrade: a new shard
    lm.libraries._located.clear()
    hints = lm.prepare_libraries(imports=imports, python_path=python, build="now")
    assert list(hints.shards) == ["zorblib"] and list(lm.libraries.built) == ["zorblib 2.0"]
    assert folder.is_dir() and lm.libraries.folder(lm.libraries.locate("zorblib", environment, None)) != folder


def test_a_damaged_shard_is_built_again_with_a_message(tmp_path, fresh_cache, caplog):
    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    lm.prepare_libraries(imports={"zl": ("zorblib",)}, python_path=python, build="now")
    source = lm.libraries.locate("zorblib", lm.libraries.environment(python, None, False), None)
    folder = lm.libraries.folder(source)
    table = next(folder.glob("order3.next_prob.npy"))
    table.write_bytes(table.read_bytes()[:-8])
    lm._libraries = None
    with caplog.at_level(logging.WARNING):
        hints = lm.prepare_libraries(imports={"zl": ("zorblib",)}, python_path=python, build="now")
    assert list(hints.shards) == ["zorblib"] and list(lm.libraries.built) == ["zorblib 1.0"]
    assert any("is damaged" in r.getMessage() and str(folder) in r.getMessage() for r in caplog.records)


def test_an_unwritable_cache_builds_shards_in_memory_with_one_message(tmp_path, fresh_cache, monkeypatch, caplog):
    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("ADAPTRACK_CACHE", str(blocked / "cache"))  # a path through a file
    with caplog.at_level(logging.WARNING):
        hints = lm.prepare_libraries(imports={"zl": ("zorblib",)}, python_path=python, build="now")
        lm.prepare_libraries(imports={"zl": ("zorblib",)}, python_path=python, build="now")
    assert list(hints.shards) == ["zorblib"]
    said = [r.getMessage() for r in caplog.records if "not writable" in r.getMessage()]
    assert len(said) == 1 and "ADAPTRACK_CACHE" in said[0]


def test_a_library_without_usable_source_gets_no_shard_and_no_retry(tmp_path, fresh_cache, caplog):
    lm = fresh_cache
    python = make_environment(tmp_path / "env", files={"__init__.py": "this is not python (\n"})
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert dict(lm.prepare_libraries(imports={"zl": ("zorblib",)}, python_path=python, build="now").shards) == {}
    said = [r.getMessage() for r in caplog.records if "no shard for zorblib 1.0" in r.getMessage()]
    assert len(said) == 1 and "no usable Python source" in said[0]


# -- mixing ---------------------------------------------------------------------------------
def test_the_shard_is_favoured_after_its_alias_and_the_base_model_elsewhere(tmp_path, fresh_cache):
    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    hints = lm.prepare_libraries(imports={"zl": ("zorblib",), "os": ("os",)}, python_path=python, build="now")
    name = lm.encode("quantize_zorbs")

    def probability(text: str, with_hints: bool) -> float:
        lm.use_libraries(hints if with_hints else None)
        lm.set_prompt(lm.encode(text))
        return float(np.exp(lm.next_logprobs([])[name[0]]))

    after_alias = "import os\nimport zorblib as zl\n\nframe = zl."
    assert probability(after_alias, True) > 20 * probability(after_alias, False)
    assert probability(after_alias, True) == pytest.approx(float(np.exp(np.max(lm.next_logprobs([])))))  # the top token
    after_os = "import os\nimport zorblib as zl\n\nname = os."
    assert probability(after_os, True) < 0.3 * probability(after_alias, True)  # the base model's place


def test_the_kind_of_position_decides_which_shards_share_the_weight(tmp_path, fresh_cache):
    lm = fresh_cache
    tables = lm.tables
    hints = LibraryHints(
        {"zorblib": tables, "pandas": tables}, {"zl": "zorblib", "df": "pandas"}, others=frozenset({"os", "np"}), standard=frozenset({"os"})
    )
    lm.use_libraries(hints)
    assert lm._library_position("x = zl.") == ("own", ("zorblib",))
    assert lm._library_position("x = df.groupby") == ("own", ("pandas",))
    assert lm._library_position("x = zl.core.") == ("own", ("zorblib",))
    assert lm._library_position("x = os.path.") == ("standard", ("zorblib", "pandas"))
    assert lm._library_position("x = np.linalg.") == ("module", ("zorblib", "pandas"))
    assert lm._library_position("x = self.") == ("chain", ("zorblib", "pandas"))
    assert lm._library_position("x = zl.quantize_zorbs(df.a, ") == ("line", ("zorblib", "pandas"))
    assert lm._library_position("for x in range(") == ("other", ("zorblib", "pandas"))
    assert set(builtin.SHARD_WEIGHTS) == {"own", "module", "standard", "chain", "line", "other"}
    assert all(set(by) == {"shorter", "same", "longer"} and all(0.0 <= w < 1.0 for w in by.values()) for by in builtin.SHARD_WEIGHTS.values())


def test_hints_read_the_documents_names_and_the_contexts_imports():
    assert imported_modules("import numpy as np, os.path\nfrom pandas.core import frame\nfrom . import utils\n") == ["numpy", "os", "pandas"]
    assert receiver_class(("models", "Stock", "()")) == "Stock"
    assert receiver_class(("pandas", "read_csv", "()")) is None  # a call's result: no class name
    assert receiver_class(("models", "Stock")) is None  # the class itself, not an instance


# -- the project's own classes after a typed receiver --------------------------------------------
STOCK = "# Path: inventory.py\nclass Stock:\n    def zorbify_shelves(self):\n        ...\n\n\n"


@pytest.mark.parametrize(
    "current, hints",
    [
        ("# Path: main.py\nfrom inventory import Stock\n\n\ndef refill(stock: Stock):\n    stock.", None),
        ("# Path: main.py\nfrom inventory import Stock\n\nstock = Stock()\nstock.", None),
        # the request's receivers (the constraint's answer), where the file says nothing
        ("# Path: main.py\nfrom inventory import Stock\n\nstock = make()\nstock.", LibraryHints(classes={"stock": "Stock"})),
    ],
)
def test_the_members_of_a_project_class_are_proposed_after_a_typed_receiver(small_model, current, hints):
    lm, _ = small_model
    name = lm.encode("zorbify_shelves")
    lm.use_libraries(hints)
    try:
        lm.set_prompt(lm.encode(STOCK + current))
        assert int(np.argmax(lm.next_logprobs([]))) == name[0]
        # the same name with no type known: not proposed
        lm.use_libraries(None)
        lm.set_prompt(lm.encode(STOCK + current.replace("stock.", "other.")))
        assert int(np.argmax(lm.next_logprobs([]))) != name[0]
    finally:
        lm.use_libraries(None)


def test_the_request_passes_typed_receivers_of_project_classes(tmp_path, fresh_cache):
    """`prepare_libraries` turns the request's receivers into classes (and owners)."""
    lm = fresh_cache
    hints = lm.prepare_libraries(imports={"Stock": ("inventory", "Stock")}, receivers={"stock": ("inventory", "Stock", "()")})
    assert dict(hints.classes) == {"stock": "Stock"} and dict(hints.shards) == {}



def test_a_receiver_typed_with_a_library_class_is_that_librarys_position(tmp_path, fresh_cache):
    """``frame.`` where ``frame = zl.ZorbFrame()``: the receiver analysis the constraint
    uses types it, and the library's shard takes the position as after ``zl.``."""
    from adaptrack_lsp.apis.imports import document_roots
    from adaptrack_lsp.apis.receivers import receiver_bindings

    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    text = "import os\nimport zorblib as zl\n\nframe = zl.ZorbFrame()\nother = make()\ntotal = frame."
    roots = document_roots(text)
    receivers = receiver_bindings(text, len(text), roots)
    assert receivers["frame"] == ("zorblib", "ZorbFrame", "()") and "other" not in receivers
    hints = lm.prepare_libraries(imports=roots, receivers=receivers, python_path=python, build="now")
    assert list(hints.shards) == ["zorblib"] and hints.owners["frame"] == "zorblib" and hints.classes["frame"] == "ZorbFrame"
    lm.use_libraries(hints)
    assert lm._library_position("total = frame.") == ("own", ("zorblib",))
    assert lm._library_position("total = other.") == ("chain", ("zorblib",))

# -- the fit ---------------------------------------------------------------------------------------
def test_the_weight_fit_recovers_a_known_mixture():
    """Tokens drawn from (1 - s d) ((1 - a) base + a shard) + s d document, with the record
    saying d: the fit finds a and the document model's scale s."""
    rng = np.random.default_rng(7)
    vocabulary = 50
    records = []
    for kind, true_weight, true_scale in (("own", 0.7, 1.0), ("other", 0.1, 2.0)):
        for _ in range(4000):
            base = rng.dirichlet(np.full(vocabulary, 0.3))
            shard = rng.dirichlet(np.full(vocabulary, 0.3))
            document, weight = rng.dirichlet(np.full(vocabulary, 0.3)), 0.2
            used = true_scale * weight
            mixed = (1 - used) * ((1 - true_weight) * base + true_weight * shard) + used * document
            token = rng.choice(vocabulary, p=mixed / mixed.sum())
            records.append((kind, base[token], shard[token], document[token], weight))
    records.append(("line", 0.5, None, 0.0, 0.0))  # no shard there: left out
    records += [("own rare", r[1], r[2], r[3], r[4]) for r in records[:20]]  # too few: fitted with "own"
    fitted = fit_shard_weights(records)
    assert set(fitted) == {"own", "own rare", "other"} and fitted["own rare"].tokens == 20
    own = fit_shard_weights([r for r in records if r[0].startswith("own")])["own"]
    assert fitted["own rare"].shard == pytest.approx(own.shard, abs=0.01)
    assert fitted["own"].shard == pytest.approx(0.7, abs=0.05) and fitted["other"].shard == pytest.approx(0.1, abs=0.05)
    assert (fitted["own"].document, fitted["other"].document) == (1.0, 2.0)
    assert fitted["own"].tokens == 4000 and fitted["own"].perplexity < fitted["own"].perplexity_without


def test_build_shard_counts_with_the_base_tokenizer(tmp_path, small_model):
    lm, _ = small_model
    python = make_environment(tmp_path / "env")
    source = locate_library("zorblib", project_environment(python, None, False))
    shard = build_shard(lm.tokenizer, source)
    assert shard.tables.vocab_size == lm.vocab.size and shard.tables.order == 6
    assert shard.manifest["corpus_tokens"] == sum(len(lm.encode(t)) + 1 for t in (LIBRARY["__init__.py"], LIBRARY["core.py"]))
    assert os.path.basename(shard.manifest["location"]) == "zorblib"


# -- through the completion service --------------------------------------------------------
def test_a_one_shot_command_uses_cached_shards_and_the_editor_builds_them(tmp_path, fresh_cache):
    """`complete(wait_for_index=True)` (the CLI) builds nothing; an editor's request
    (no waiting) starts the build in the background, and the next request uses it."""
    from adaptrack_lsp.apis.snapshot import module_snapshot, write_snapshot
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.config import Settings

    lm = fresh_cache
    python = make_environment(tmp_path / "env")
    snapshot = tmp_path / "json.json"  # a fixed API index: no interpreter to start
    write_snapshot(module_snapshot("json"), snapshot)
    settings = Settings(model="builtin", python_path=python, api_snapshot=str(snapshot), temperature=0.0, max_new_tokens=4)
    service = CompletionService(settings, workspace_root=str(tmp_path / "workspace"), model_loader=lambda _s, _p: lm)
    service.load()
    heard: list[str] = []
    service.host.library_progress = heard.append
    document = "import zorblib as zl\n\nframe = zl."
    try:
        service.complete(document, len(document), wait_for_index=True)
        assert lm.libraries.wait_idle(0) and heard == [] and not (tmp_path / "cache" / "builtin-shards").exists()
        service.complete(document, len(document))
        assert lm.libraries.wait_idle(60) and heard[0].startswith("learning zorblib 1.0") and heard[-1] == ""
        assert list(lm._hints.shards) == []  # that request went without it
        service.complete(document, len(document), wait_for_index=True)
        assert list(lm._hints.shards) == ["zorblib"] and dict(lm._hints.owners) == {"zl": "zorblib"}
    finally:
        service.close()
