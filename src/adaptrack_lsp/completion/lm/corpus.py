"""The built-in model's training corpus: permissively licensed Python that installed packages ship.

Owns which sources the built-in model learns from and the record of where they came
from.  A corpus is a list of `CorpusPackage`s: the standard library of the running
interpreter (PSF-2.0) and pip packages found in the server's own environment (never
the user's project, never a workspace).  For each package the manifest records its
version, its licence as the package's metadata states it, and the files and bytes
taken.  A package that is not installed is skipped and named; one whose metadata does
not state a licence on the permissive list is skipped and named too.

Files are taken in sorted path order; a file is used when it is UTF-8, at most
`max_file_bytes`, and parses with the running interpreter (`ast`), which keeps Python 2
test data and deliberately broken test files out.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
import sysconfig
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: the special token that ends a document (and pads the start of the next)
END_OF_TEXT = "<|endoftext|>"

#: licence words accepted as permissive (SPDX ids and classifier/licence-field wording)
PERMISSIVE = re.compile(
    r"^(MIT|0?BSD(-\d-Clause)?|BSD( License)?|Apache(-2\.0| 2\.0| Software License| License 2\.0|"
    r" 2\.0 License| License, Version 2\.0)?|Apache-2\.0 WITH LLVM-exception|PSF-2\.0|Python Software Foundation License|"
    r"ISC|Zlib|BSL-1\.0|CC0-1\.0|Unlicense|MIT License|ISC License \(ISCL\))$",
    re.IGNORECASE,
)
STDLIB = "stdlib"


@dataclass(frozen=True)
class CorpusPackage:
    """One source of the corpus: an importable top-level package and its distribution."""

    module: str  # import name, or "stdlib"
    distribution: str = ""  # pip distribution name (metadata: version, licence)


@dataclass
class PackageRecord:
    """What the manifest says about one package."""

    module: str
    distribution: str
    version: str
    license: str
    files: int = 0
    bytes: int = 0
    skipped_files: int = 0


@dataclass
class CorpusReport:
    """The packages used and the ones skipped (with why), for the manifest and messages."""

    used: list[PackageRecord] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # module -> reason

    def as_dict(self) -> dict:
        return {"packages": [vars(r) for r in self.used], "skipped": dict(self.skipped)}


def _license_terms(metadata) -> list[str]:
    expression = metadata.get("License-Expression")
    if expression:
        return [term.strip("() ") for term in re.split(r"\s+(?:AND|OR)\s+", expression)]
    classifiers = [c.rsplit("::", 1)[-1].strip() for c in metadata.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        return classifiers
    text = (metadata.get("License") or "").strip()
    return [text.splitlines()[0].strip()] if text else []


def license_of(package: CorpusPackage) -> tuple[str, str, bool]:
    """(version, licence text, whether every licence term is permissive)."""
    if package.module == STDLIB:
        return sys.version.split()[0], "PSF-2.0", True
    metadata = importlib.metadata.metadata(package.distribution)
    terms = _license_terms(metadata)
    permissive = bool(terms) and all(PERMISSIVE.match(term) for term in terms)
    return metadata.get("Version", "?"), " AND ".join(terms) or "unknown", permissive


def package_root(package: CorpusPackage) -> Path | None:
    """The folder of a package's sources (None when it is not installed)."""
    if package.module == STDLIB:
        return Path(sysconfig.get_paths()["stdlib"])
    try:
        spec = importlib.util.find_spec(package.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def identity(packages: list[CorpusPackage]) -> list[list[str]]:
    """What the corpus depends on (module, version or "missing"), for the cache key."""
    result = []
    for package in packages:
        if package_root(package) is None:
            result.append([package.module, "missing"])
            continue
        try:
            version = license_of(package)[0]
        except importlib.metadata.PackageNotFoundError:
            version = "no-metadata"
        result.append([package.module, version])
    return result


def _source_files(package: CorpusPackage, root: Path) -> list[Path]:
    files = []
    for path in root.rglob("*.py"):
        relative = path.relative_to(root).parts
        if package.module == STDLIB and relative[0] in ("site-packages", "dist-packages"):
            continue
        files.append(path)
    return sorted(files)


def usable_source(path: Path, max_file_bytes: int) -> str | None:
    """The text of a source file fit for the corpus, or None."""
    try:
        if path.stat().st_size > max_file_bytes:
            return None
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, str(path), "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    return text


def corpus_files(packages: list[CorpusPackage], report: CorpusReport) -> list[tuple[PackageRecord, Path]]:
    """The candidate source files of the installed, permissive packages, in order.

    Fills `report`: a package that is missing or not permissively licensed is skipped
    with the reason."""
    files = []
    for package in packages:
        root = package_root(package)
        if root is None:
            report.skipped[package.module] = "not installed"
            continue
        try:
            version, license_text, permissive = license_of(package)
        except importlib.metadata.PackageNotFoundError:
            report.skipped[package.module] = f"no metadata for distribution {package.distribution!r}"
            continue
        if not permissive:
            report.skipped[package.module] = f"licence {license_text!r} is not on the permissive list"
            continue
        record = PackageRecord(package.module, package.distribution or "python", version, license_text)
        report.used.append(record)
        files.extend((record, path) for path in _source_files(package, root))
    return files


def read_corpus(
    files: list[tuple[PackageRecord, Path]], max_file_bytes: int, max_bytes: int | None = None
) -> Iterator[str]:
    """The text of every usable file (see `usable_source`), counted in its package's
    record; stops after `max_bytes` of text when given."""
    total = 0
    for record, path in files:
        text = usable_source(path, max_file_bytes)
        if text is None:
            record.skipped_files += 1
            continue
        record.files += 1
        size = len(text.encode("utf-8"))
        record.bytes += size
        total += size
        yield text
        if max_bytes is not None and total >= max_bytes:
            return


def corpus_token_stream(
    tokenizer, texts: list[str], order: int, progress: Callable[[float], None] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """`texts` tokenized into one stream for `build_tables`: (tokens, counted flags).

    A document starts after order - 1 end-of-text tokens; the first of them ends the
    previous document (a prediction), the others are padding.  `progress(fraction)`
    after each batch."""
    eos = tokenizer.token_to_id(END_OF_TEXT)
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    token_dtype = np.uint16 if vocab_size <= 1 << 16 else np.int32
    pieces, counted = [], []
    batch = 128
    for begin in range(0, len(texts), batch):
        for encoding in tokenizer.encode_batch(texts[begin : begin + batch], add_special_tokens=False):
            pieces.append(np.full(order - 1, eos, dtype=token_dtype))
            flags = np.zeros(order - 1, dtype=bool)
            flags[0] = len(pieces) > 1
            counted.append(flags)
            ids = np.asarray(encoding.ids, dtype=token_dtype)
            pieces.append(ids)
            counted.append(np.ones(len(ids), dtype=bool))
        if progress is not None:
            progress(min(1.0, (begin + batch) / len(texts)))
    pieces.append(np.full(1, eos, dtype=token_dtype))
    counted.append(np.ones(1, dtype=bool))
    return np.concatenate(pieces), np.concatenate(counted)
