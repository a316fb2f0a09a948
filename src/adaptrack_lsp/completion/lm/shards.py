"""Library shards of the built-in model: Kneser–Ney tables counted from the installed
sources of the libraries a document imports, in the versions the project has.

Owns where a library's sources are (`project_environment`, `locate_library`), which of
its files a shard reads (`shard_files`: no tests, a size cap met by sampling), building
a shard (`build_shard`; the base model's tokenizer, so a shard's distributions mix with
the base model's token by token), the cache (`LibraryShards`: one folder per
distribution, version and base model, built in the background, one at a time, with
progress) and what a request tells the model (`LibraryHints`: the shards of its
imports and which names in the document belong to which library).

The project environment is the one the API index reads: the interpreter `pythonPath`
names, else (trusted workspaces only) the workspace's ``.venv``, else ``$VIRTUAL_ENV``,
else the server's own (`apis.jedi_index.find_python`).  In an untrusted workspace an
interpreter that lies inside the workspace is never used (the server's own environment
is read instead).  Finding the sources runs nothing for the server's own environment
and for virtual environments (their ``pyvenv.cfg`` says where ``site-packages`` is);
any other interpreter (a system Python named by `pythonPath`) is asked for its
``sys.path`` once, time-limited and isolated, as the API index asks it.  Reading the
sources runs nothing: files are read and parsed (`ast`), never imported.

A library gets a shard when it is an installed distribution (its ``.dist-info`` lies in
the same ``site-packages`` folder), lies outside the workspace (the user's project is
never a corpus), is not part of the standard library, and is not in the base model's
corpus at the same version (numpy 2.4.6 next to the server: the base model learned it).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from adaptrack_lsp.completion.lm.corpus import usable_source
from adaptrack_lsp.completion.lm.ngram import NGramTables, build_tables

logger = logging.getLogger(__name__)

#: every input of a shard; changing a value changes the shard folders
SHARD_RECIPE = {
    "shard": 1,
    "order": 6,
    "prune_from": 3,
    "max_file_bytes": 400_000,
    #: source bytes read per shard; a larger library (torch, TensorFlow) is sampled
    "max_bytes": 16_000_000,
    #: reading and tokenizing stop taking files after this many seconds
    "max_read_seconds": 60.0,
    #: folders whose files are tests (left out: they are what the benchmark measures on)
    "test_folders": ["tests", "test"],
}
#: seconds a project environment's location (its sys.path) and a library's location are
#: trusted before they are looked at again (a ``pip install`` of a new version is seen)
LOCATION_SECONDS = 5.0
#: shards kept loaded (memory-mapped) at once
MAX_LOADED = 32
MARKER = "adaptrack-shard.json"
_TEST_FILE = re.compile(r"^(?:test_.*|.*_test|conftest)\.py$")
_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b|import[ \t]+([^\n#;]+))", re.M)

#: when a shard that is not cached is built (`LibraryShards.shard`)
BUILDS = ("now", "background", "never")
#: progress(message) of shard builds; "" when no build is left
LibraryProgress = Callable[[str], None]


# -- the project environment ------------------------------------------------------------
@dataclass(frozen=True)
class ProjectEnvironment:
    """Where the project's packages are: the interpreter, how it was chosen, and the
    folders its packages are installed in (``site-packages``)."""

    python: str | None
    found_by: str
    site_folders: tuple[str, ...]
    problem: str = ""


def _inside(path: str | os.PathLike, folder: str | os.PathLike) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(folder))
    except (OSError, ValueError):
        return False


def _site_folders(entries: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e for e in entries if e and os.path.basename(e) in ("site-packages", "dist-packages") and os.path.isdir(e)))


def _venv_site_folders(python: str) -> tuple[str, ...] | None:
    """The ``site-packages`` of the virtual environment `python` belongs to, read from
    its folders and ``pyvenv.cfg`` (nothing runs); None when it is not a venv's."""
    prefix = Path(python).parent.parent
    config = prefix / "pyvenv.cfg"
    if not config.is_file():
        return None
    folders = [str(p) for p in sorted(prefix.glob("lib*/python3*/site-packages"))]
    folders += [str(p) for p in sorted(prefix.glob("Lib/site-packages"))]
    try:
        settings = dict(
            line.split("=", 1) for line in config.read_text(encoding="utf-8", errors="replace").splitlines() if "=" in line
        )
    except OSError:
        settings = {}
    settings = {key.strip().lower(): value.strip() for key, value in settings.items()}
    if settings.get("include-system-site-packages", "false").lower() == "true" and settings.get("home"):
        base = Path(settings["home"]).parent
        folders += [str(p) for p in sorted(base.glob("lib*/python3*/site-packages"))]
    return _site_folders(folders)


def project_environment(python_path: str | None, workspace_root: str | None, trusted: bool) -> ProjectEnvironment:
    """The environment whose installed libraries get shards (see the module docstring)."""
    from adaptrack_lsp.apis.jedi_index import FOUND_BY_SETTING, find_python

    python, found_by, problem = find_python(python_path, workspace_root, trusted)
    if problem or python is None:
        return ProjectEnvironment(None, found_by, (), problem or "no interpreter")
    if not trusted and found_by != FOUND_BY_SETTING and workspace_root and _inside(python, workspace_root):
        python, found_by = sys.executable, "server interpreter (the one found lies in the untrusted workspace)"
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return ProjectEnvironment(python, found_by, _site_folders(sys.path))
    folders = _venv_site_folders(python)
    if folders is not None:
        return ProjectEnvironment(python, found_by, folders)
    if found_by != FOUND_BY_SETTING:  # an interpreter nobody named is not run for this
        return ProjectEnvironment(python, found_by, (), f"{python} is not a virtual environment's; set pythonPath to name it")
    from adaptrack_lsp.apis.index_cache import EnvironmentProbeError, probe_environment

    try:
        facts = probe_environment(python)
    except EnvironmentProbeError as error:
        return ProjectEnvironment(python, found_by, (), str(error))
    return ProjectEnvironment(python, found_by, _site_folders(facts.sys_path))


# -- a library's sources ----------------------------------------------------------------------
@dataclass(frozen=True)
class LibrarySource:
    """An installed library: its top-level module, the distribution that provides it,
    and where its sources are (a package folder, or one ``module.py``)."""

    module: str
    distribution: str
    version: str
    location: str
    license: str = ""

    @property
    def label(self) -> str:
        return f"{self.module} {self.version}"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _distribution(site: Path, module: str) -> tuple[str, str, Path] | None:
    """(name, version, dist-info folder) of the distribution in `site` that provides
    `module` (by its name, ``top_level.txt``, then ``RECORD``)."""
    try:
        folders = sorted(entry for entry in site.iterdir() if entry.name.endswith(".dist-info") and "-" in entry.name)
    except OSError:
        return None
    named = [(folder, *folder.name[: -len(".dist-info")].split("-", 1)) for folder in folders]
    for folder, name, version in named:
        if _normalized(name) == _normalized(module):
            return name, version, folder
    for reader, matches in (
        ("top_level.txt", lambda text: module in text.split()),
        ("RECORD", lambda text: any(line.startswith((f"{module}/", f"{module}.py,")) for line in text.splitlines())),
    ):
        for folder, name, version in named:
            try:
                text = (folder / reader).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if matches(text):
                return name, version, folder
    return None


def _license(dist_info: Path) -> str:
    from email.parser import Parser

    from adaptrack_lsp.completion.lm.corpus import _license_terms

    try:
        with open(dist_info / "METADATA", encoding="utf-8", errors="replace") as handle:
            metadata = Parser().parse(handle, headersonly=True)
    except OSError:
        return "unknown"
    return " AND ".join(_license_terms(metadata)) or "unknown"


def locate_library(module: str, environment: ProjectEnvironment, workspace_root: str | None = None) -> LibrarySource | None:
    """The installed library `module` in `environment`, or None (not installed, part of
    the standard library, not an installed distribution, or inside the workspace)."""
    if not module.isidentifier() or module in sys.stdlib_module_names or module == "__future__":
        return None
    for entry in environment.site_folders:
        site = Path(entry)
        package = site / module
        location = package if (package / "__init__.py").is_file() else site / f"{module}.py"
        if not location.exists():
            if package.is_dir() and any(package.glob("*.py")):  # a namespace package
                location = package
            else:
                continue
        if workspace_root and _inside(location, workspace_root):
            return None
        found = _distribution(site, module)
        if found is None:
            return None
        name, version, dist_info = found
        return LibrarySource(module, name, version, str(location), _license(dist_info))
    return None


@dataclass
class ShardFiles:
    """The files a shard reads, and how they were chosen."""

    files: list[Path]
    candidates: int  # source files that are not tests
    candidate_bytes: int
    tests_left_out: int
    sampled: bool


def shard_files(location: str | os.PathLike, recipe: Mapping = SHARD_RECIPE) -> ShardFiles:
    """A library's ``.py`` files without its tests (folders named in
    ``test_folders``, ``test_*.py``, ``*_test.py``, ``conftest.py``) and without files
    larger than ``max_file_bytes``; when they hold more than ``max_bytes``, a sample:
    files in the order of a hash of their path (the same sample every time, spread over
    the whole package) until the cap."""
    root = Path(location)
    if root.is_file():
        return ShardFiles([root], 1, root.stat().st_size, 0, False)
    test_folders = set(recipe["test_folders"])
    candidates: list[tuple[Path, int]] = []
    tests = 0
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if test_folders.intersection(parts[:-1]) or _TEST_FILE.match(parts[-1]):
            tests += 1
            continue
        if "__pycache__" in parts:
            continue
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size <= recipe["max_file_bytes"]:
            candidates.append((path, size))
    total = sum(size for _, size in candidates)
    if total <= recipe["max_bytes"]:
        return ShardFiles([path for path, _ in candidates], len(candidates), total, tests, False)
    ordered = sorted(candidates, key=lambda item: zlib.crc32(str(item[0].relative_to(root)).encode()))
    chosen, taken = [], 0
    for path, size in ordered:
        if taken + size > recipe["max_bytes"]:
            continue
        chosen.append(path)
        taken += size
    return ShardFiles(sorted(chosen), len(candidates), total, tests, True)


# -- building and loading ------------------------------------------------------------------
@dataclass
class Shard:
    """A library's n-gram tables and what they were counted from."""

    source: LibrarySource
    tables: NGramTables
    manifest: dict


def build_shard(
    tokenizer, source: LibrarySource, recipe: Mapping = SHARD_RECIPE, progress: Callable[[str, float], None] | None = None
) -> Shard:
    """Count a shard of `source` with `tokenizer` (the base model's); raises ValueError
    when the library has no usable source.  `progress(stage, fraction)`."""
    from adaptrack_lsp.completion.lm.corpus import corpus_token_stream

    started = time.perf_counter()
    chosen = shard_files(source.location, recipe)
    texts, read_bytes, skipped, cut_by_time = [], 0, 0, 0
    deadline = started + float(recipe["max_read_seconds"])
    for number, path in enumerate(chosen.files, 1):
        if time.perf_counter() > deadline:
            cut_by_time = len(chosen.files) - number + 1
            break
        text = usable_source(path, recipe["max_file_bytes"])
        if text is None:
            skipped += 1
            continue
        texts.append(text)
        read_bytes += len(text.encode("utf-8"))
        if progress is not None and number % 16 == 0:
            progress("reading", number / len(chosen.files))
    if not texts:
        raise ValueError(f"{source.label} has no usable Python source (tests left out)")
    order = int(recipe["order"])
    tokens, flags = corpus_token_stream(tokenizer, texts, order, lambda done: progress and progress("tokenizing", done))
    read_seconds = time.perf_counter() - started
    files = len(texts)
    del texts
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    tables = build_tables(
        tokens, flags, order, vocab_size, prune_from=int(recipe["prune_from"]), progress=lambda k: progress and progress("counting", k / order)
    )
    corpus_tokens = int(flags.sum())
    del tokens, flags
    manifest = {
        "module": source.module,
        "distribution": source.distribution,
        "version": source.version,
        "license": source.license,
        "location": source.location,
        "python": sys.version.split()[0],
        "files": files,
        "bytes": read_bytes,
        "candidate_files": chosen.candidates,
        "candidate_bytes": chosen.candidate_bytes,
        "test_files_left_out": chosen.tests_left_out,
        "sampled": chosen.sampled,
        "unusable_files": skipped,
        "files_cut_by_time": cut_by_time,
        "corpus_tokens": corpus_tokens,
        "table_entries": tables.entries,
        "table_bytes": tables.nbytes,
        "read_seconds": round(read_seconds, 1),
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    return Shard(source, tables, manifest)


def save_shard(shard: Shard, folder: Path, recipe: Mapping) -> None:
    names = shard.tables.save(folder)
    (folder / "manifest.json").write_text(json.dumps(shard.manifest, indent=1, sort_keys=True) + "\n")
    sizes = {name: (folder / name).stat().st_size for name in ["manifest.json", *names]}
    marker = {"recipe": dict(recipe), "source": dataclasses.asdict(shard.source), "files": sizes}
    (folder / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True) + "\n")


def load_shard(folder: Path, vocab_size: int) -> Shard:
    """The shard saved in `folder`; raises ValueError when its files do not check out."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        for name, size in marker["files"].items():
            actual = (folder / name).stat().st_size
            if actual != size:
                raise ValueError(f"{name} has {actual} bytes, {size} expected")
        tables = NGramTables.load(folder)
        if tables.vocab_size != vocab_size:
            raise ValueError(f"the shard has {tables.vocab_size} tokens, the model {vocab_size}")
        manifest = json.loads((folder / "manifest.json").read_text())
        return Shard(LibrarySource(**marker["source"]), tables, manifest)
    except ValueError:
        raise
    except Exception as error:  # any unreadable or inconsistent file
        raise ValueError(f"{type(error).__name__}: {error}") from error


# -- what a request tells the model -----------------------------------------------------------
@dataclass(frozen=True)
class LibraryHints:
    """For one request: the loaded shards of the libraries it imports (top-level module
    -> tables), which names of the document belong to which of them (import aliases and
    typed receivers -> top-level module), the names bound to anything else (a module
    without a shard: ``os``, the project's own), and the class each typed receiver is
    an instance of (``stock`` -> ``Stock``); `standard`: those of `others` that belong to
    the standard library (``os``, ``warnings``, ``f`` of an ``io`` type)."""

    shards: Mapping[str, NGramTables] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)
    classes: Mapping[str, str] = field(default_factory=dict)
    others: frozenset[str] = frozenset()
    standard: frozenset[str] = frozenset()


def _standard_module(module: str) -> bool:
    return module in sys.stdlib_module_names or module == "__future__"


def imported_modules(text: str) -> list[str]:
    """Top-level modules a text imports (absolute imports), by a line scan: what the
    project context's snippets import."""
    found = []
    for match in _IMPORT_LINE.finditer(text):
        if match.group(1):
            found.append(match.group(1))
        else:
            for item in match.group(2).split(","):
                name = item.strip().split(" ")[0].split(".")[0].strip("()")
                if name.isidentifier():
                    found.append(name)
    return list(dict.fromkeys(found))


def receiver_class(path: tuple[str, ...]) -> str | None:
    """The class a typed receiver is an instance of: the last name of its typed path
    (``("models", "Stock", "()")`` -> ``Stock``), when it reads as a class name."""
    names = [name for name in path if name != "()"]
    if not names or path[-1:] != ("()",):
        return None
    name = names[-1]
    return name if name[:1].isupper() else None


def _log_likelihood(alpha: float, weight: np.ndarray, base: np.ndarray, shard: np.ndarray, document: np.ndarray) -> float:
    p = (1.0 - weight) * ((1.0 - alpha) * base + alpha * shard) + weight * document
    return float(np.log(np.maximum(p, 1e-300)).sum())


#: the document-model scales `fit_shard_weights` tries (see there)
DOCUMENT_SCALES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)


@dataclass(frozen=True)
class FittedWeights:
    """What `fit_shard_weights` found for one kind of position."""

    shard: float  # the shards' share of the corpus part
    document: float  # the scale of the document model's weight
    tokens: int
    perplexity_without: float  # no shards, the document model as it is
    perplexity: float  # at the fitted weights


def fit_shard_weights(
    records: Iterable[tuple[str, float, float | None, float, float]], iterations: int = 100, min_tokens: int = 100
) -> dict[str, FittedWeights]:
    """The weights per kind of position that maximise the likelihood of held-out tokens,
    from records (kind, P under the base model, P under the shards (None: no shard
    there, left out), P under the document model, the document model's weight d): the
    token's probability is (1 - d') ((1 - a) base + a shards) + d' document with
    d' = min(s d, 0.99).  Per kind, for each scale s of `DOCUMENT_SCALES` the shards'
    weight a is fitted by EM (one mixture component's weight), and the pair with the
    highest likelihood is kept: where a shard knows the library, the document model's
    share may have to change too.  A kind with fewer than `min_tokens` tokens is fitted
    together with the kinds of the same first word (``"module longer"`` with ``"module
    same"`` and ``"module shorter"``)."""
    by_kind: dict[str, list[tuple[float, float, float, float]]] = {}
    for kind, base, shard, document, weight in records:
        if shard is not None:
            by_kind.setdefault(kind, []).append((base, shard, document, weight))
    pooled: dict[str, list[tuple[float, float, float, float]]] = {}
    for kind, rows in by_kind.items():
        pooled.setdefault(kind.split(" ")[0], []).extend(rows)
    fitted = {}
    for kind, own_rows in sorted(by_kind.items()):
        rows = own_rows if len(own_rows) >= min_tokens else pooled[kind.split(" ")[0]]
        base, shard, document, matched = (np.asarray(column, dtype=np.float64) for column in zip(*rows))
        best = None
        for scale in DOCUMENT_SCALES:
            weight = np.minimum(scale * matched, 0.99)
            alpha = 0.5
            for _ in range(iterations):
                from_shard = (1.0 - weight) * alpha * shard
                from_base = (1.0 - weight) * (1.0 - alpha) * base
                total = from_shard + from_base + weight * document
                responsible_shard = (from_shard / total).sum()
                responsible_base = (from_base / total).sum()
                alpha = float(responsible_shard / max(responsible_shard + responsible_base, 1e-300))
            found = (_log_likelihood(alpha, weight, base, shard, document), alpha, scale)
            if best is None or found[0] > best[0]:
                best = found
        likelihood, alpha, scale = best
        without = _log_likelihood(0.0, np.minimum(matched, 0.99), base, shard, document)
        fitted[kind] = FittedWeights(
            alpha, scale, len(own_rows), float(np.exp(-without / len(rows))), float(np.exp(-likelihood / len(rows)))
        )
    return fitted


# -- the cache and the builder ----------------------------------------------------------------
class LibraryShards:
    """The shards of one base model: found in the cache, loaded memory-mapped, or built
    in the background (one at a time, on a daemon thread) when first imported.

    `enabled` False: no shards (requests get only the receiver classes)."""

    def __init__(self, base_key: str, tokenizer_json: str, vocab_size: int, base_corpus: Mapping[str, str], recipe: Mapping = SHARD_RECIPE):
        self.base_key = base_key
        self.vocab_size = vocab_size
        #: module -> version of the base model's corpus packages (no shard for those)
        self.base_corpus = dict(base_corpus)
        self.recipe = dict(recipe)
        self.enabled = True
        self._tokenizer_json = tokenizer_json
        self._tokenizer = None
        self._lock = threading.Lock()
        self._loaded: collections.OrderedDict[str, Shard] = collections.OrderedDict()
        self._failed: dict[str, str] = {}
        self._queue: collections.deque[LibrarySource] = collections.deque()
        self._queued: set[str] = set()
        self._worker: threading.Thread | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._progress: LibraryProgress | None = None
        self._environments: dict[tuple, tuple[float, ProjectEnvironment]] = {}
        self._located: dict[tuple, tuple[float, LibrarySource | None]] = {}
        self._folders: dict[tuple[Path, LibrarySource], Path] = {}
        self._unwritable_said = False
        #: seconds and table bytes of each shard built in this process (the benchmark)
        self.built: dict[str, dict] = {}

    # -- where --------------------------------------------------------------------------
    def folder(self, source: LibrarySource) -> Path:
        """Where the shard of `source` is cached (under the cache root)."""
        from adaptrack_lsp.config import cache_root

        root = cache_root()
        found = self._folders.get((root, source))
        if found is None:
            if len(self._folders) > 4096:
                self._folders.clear()
            found = self._folders[(root, source)] = self._folder(root, source)
        return found

    def _folder(self, root: Path, source: LibrarySource) -> Path:
        from adaptrack_lsp.cache import recipe_key

        key = recipe_key(
            "shard",
            {"recipe": self.recipe, "base": self.base_key, "distribution": source.distribution, "version": source.version, "module": source.module},
            with_torch=False,
        )
        safe = re.sub(r"[^\w.+-]", "_", f"{source.module}-{source.version}")
        return root / "builtin-shards" / self.base_key / f"{safe}-{key.rsplit('-', 1)[-1]}"

    def environment(self, python_path: str | None, workspace_root: str | None, trusted: bool) -> ProjectEnvironment:
        key = (python_path, workspace_root, trusted)
        now = time.monotonic()
        cached = self._environments.get(key)
        if cached is None or now - cached[0] > LOCATION_SECONDS:
            cached = (now, project_environment(python_path, workspace_root, trusted))
            self._environments[key] = cached
            if cached[1].problem:
                logger.info("built-in model: no library shards from %s: %s", cached[1].python, cached[1].problem)
        return cached[1]

    def locate(self, module: str, environment: ProjectEnvironment, workspace_root: str | None) -> LibrarySource | None:
        key = (environment.site_folders, module, workspace_root)
        now = time.monotonic()
        cached = self._located.get(key)
        if cached is None or now - cached[0] > LOCATION_SECONDS:
            source = locate_library(module, environment, workspace_root)
            if source is not None and self.base_corpus.get(source.module) == source.version:
                source = None  # the base model learned this very version
            cached = (now, source)
            if len(self._located) > 4096:
                self._located.clear()
            self._located[key] = cached
        return cached[1]

    # -- per request ----------------------------------------------------------------------
    def hints(
        self,
        modules: Iterable[str],
        owners: Mapping[str, str],
        classes: Mapping[str, str],
        environment: ProjectEnvironment,
        workspace_root: str | None = None,
        build: str = "background",
        progress: LibraryProgress | None = None,
    ) -> LibraryHints:
        """The hints for a request that imports `modules` (owners: document name -> top
        module).  Shards not built yet are built (`build`): "now", in the "background"
        (this request goes without them; `progress` hears the build), or "never" (only
        the cached ones are used: a one-shot command does not start builds it would not
        see finish)."""
        shards: dict[str, NGramTables] = {}
        if self.enabled:
            for module in dict.fromkeys(modules):
                source = self.locate(module, environment, workspace_root)
                if source is None:
                    continue
                shard = self.shard(source, build=build, progress=progress)
                if shard is not None:
                    shards[module] = shard.tables
        return LibraryHints(
            shards,
            {name: module for name, module in owners.items() if module in shards},
            dict(classes),
            frozenset(name for name, module in owners.items() if module not in shards),
            frozenset(name for name, module in owners.items() if module not in shards and _standard_module(module)),
        )

    def shard(self, source: LibrarySource, build: str = "background", progress: LibraryProgress | None = None) -> Shard | None:
        """The shard of `source` when loaded or cached; else built "now", queued for the
        "background" (None now) or not at all ("never": None)."""
        if build not in BUILDS:
            raise ValueError(f"build must be one of {BUILDS}, not {build!r}")
        folder = self.folder(source)
        key = str(folder)
        with self._lock:
            if key in self._loaded:
                self._loaded.move_to_end(key)
                return self._loaded[key]
            if key in self._failed:
                return None
        if (folder / MARKER).is_file():
            try:
                return self._remember(key, load_shard(folder, self.vocab_size))
            except ValueError as error:
                logger.warning("the cached shard %s is damaged (%s); building it again", folder, error)
        if build == "now":
            return self._build(source, progress)
        if build == "never":
            return None
        with self._lock:
            if progress is not None:
                self._progress = progress
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(source)
                self._idle.clear()
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._work, name="adaptrack-shards", daemon=True)
                    self._worker.start()
        return None

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until no build is queued or running (tests, benchmarks)."""
        return self._idle.wait(timeout_s)

    # -- building --------------------------------------------------------------------------
    def _remember(self, key: str, shard: Shard) -> Shard:
        with self._lock:
            self._loaded[key] = shard
            self._loaded.move_to_end(key)
            while len(self._loaded) > MAX_LOADED:
                self._loaded.popitem(last=False)
        return shard

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None
                    progress = self._progress
                    self._idle.set()
                    break
                source = self._queue.popleft()
                progress = self._progress
            try:
                self._build(source, progress)
            except Exception:  # a build must never take the server down
                logger.exception("building the shard of %s failed", source.label)
            finally:
                with self._lock:
                    self._queued.discard(str(self.folder(source)))
        if progress is not None:
            with contextlib.suppress(Exception):
                progress("")

    def _build(self, source: LibrarySource, progress: LibraryProgress | None) -> Shard | None:
        from adaptrack_lsp.cache import file_lock

        folder = self.folder(source)
        key = str(folder)
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            self._tokenizer = Tokenizer.from_str(self._tokenizer_json)  # its own: builds run beside decoding
        weights = {"reading": (0, 30), "tokenizing": (30, 55), "counting": (85, 15)}
        said = [-1]

        def report(stage: str, fraction: float) -> None:
            start, span = weights[stage]
            percent = int(start + span * max(0.0, min(1.0, fraction)))
            if progress is not None and percent // 5 != said[0]:
                said[0] = percent // 5
                with contextlib.suppress(Exception):
                    progress(f"learning {source.label} for the built-in model (first import): {percent}%")

        report("reading", 0.0)
        started = time.perf_counter()
        try:
            if not self._writable(folder.parent):
                shard = build_shard(self._tokenizer, source, self.recipe, report)
            else:
                with file_lock(folder.parent / f".{folder.name}.lock"):
                    if (folder / MARKER).is_file():
                        with contextlib.suppress(ValueError):
                            return self._remember(key, load_shard(folder, self.vocab_size))  # built by another process
                    shard = build_shard(self._tokenizer, source, self.recipe, report)
                    temporary = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
                    try:
                        save_shard(shard, temporary, self.recipe)
                        if folder.exists():
                            shutil.rmtree(folder)
                        os.chmod(temporary, 0o755)
                        os.rename(temporary, folder)
                    finally:
                        if temporary.exists():
                            shutil.rmtree(temporary, ignore_errors=True)
                    shard = load_shard(folder, self.vocab_size)
        except Exception as error:  # no usable source, an unreadable file: not tried again in this process
            if isinstance(error, ValueError):
                logger.warning("built-in model: no shard for %s: %s", source.label, error)
            else:
                logger.exception("built-in model: building the shard of %s failed", source.label)
            with self._lock:
                self._failed[key] = str(error)
            return None
        seconds = time.perf_counter() - started
        self.built[source.label] = {"seconds": seconds, "table_bytes": shard.tables.nbytes, **shard.manifest}
        logger.info(
            "built-in model: learned %s in %.0f s (%d files, %.1f MB of source%s; %.0f MB of tables)",
            source.label,
            seconds,
            shard.manifest["files"],
            shard.manifest["bytes"] / 1e6,
            f", sampled from {shard.manifest['candidate_files']} files" if shard.manifest["sampled"] else "",
            shard.tables.nbytes / 1e6,
        )
        return self._remember(key, shard)

    def _writable(self, folder: Path) -> bool:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
            return True
        except OSError as error:
            if not self._unwritable_said:
                self._unwritable_said = True
                logger.warning(
                    "the cache folder %s is not writable (%s): library shards are built in memory (again at every "
                    "start; set ADAPTRACK_CACHE to a writable folder to keep them)",
                    folder,
                    error.strerror or error,
                )
            return False

