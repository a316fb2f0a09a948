"""TFv1Real (paper §6.2): real files cut right before their first ``tf.compat.v1`` API call.

`build_tfv1real(folder, count_tokens)` turns a folder of ``.py`` files into items:

- keep files that contain the statement ``import tensorflow as tf`` (as code);
- split at the first ``tf.compat.v1.`` that is code — found with Python's own lexer
  (`tokenize`), so occurrences in comments and strings do not count;
- drop the file if the prefix already mentions ``tf.compat.v1`` anywhere (comments and
  strings included, as in the paper);
- the suffix must be a dotted API call ``tf.compat.v1.a.b(``;
- the prompt ends right after ``tf``; the oracle is the rest of the dotted path
  (``.compat.v1.a.b``);
- drop prompts longer than `max_prompt_tokens` (paper: 4096 - 512 = 3,584) under the
  given token counter;
- dedupe identical files and identical (prompt, oracle) pairs.

`load_tfv1real(path)` reads the resulting JSONL (``{"prefix": ..., "oracle": ...}``).
"""

from __future__ import annotations

import hashlib
import io
import logging
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from adaptrack_lsp.evaluation.items import EvalItem, read_items_jsonl

log = logging.getLogger(__name__)

DEFAULT_MAX_PROMPT_TOKENS = 4096 - 512
_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}


@dataclass
class BuildReport:
    """Why files were kept or dropped."""

    files: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)

    def as_dict(self) -> dict:
        return {"files": self.files, "kept": self.kept, "dropped": dict(self.dropped)}


def _offsets(text: str) -> list[int]:
    """Character offset of the start of each line (1-based line numbers index it)."""
    starts = [0, 0]
    for line in io.StringIO(text):  # the same line splitting `tokenize` sees
        starts.append(starts[-1] + len(line))
    return starts


def _code_tokens(text: str) -> list[tokenize.TokenInfo]:
    tokens = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in _SKIP:
            continue
        tokens.append(token)
    return tokens


def _imports_tensorflow_as_tf(tokens: list[tokenize.TokenInfo]) -> bool:
    for i in range(len(tokens) - 3):
        window = [t.string for t in tokens[i : i + 4]]
        if window == ["import", "tensorflow", "as", "tf"]:
            previous = tokens[i - 1] if i else None
            # `import tensorflow as tf` starts a statement (not `from x import tensorflow as tf`)
            if previous is None or previous.string == ";" or previous.end[0] < tokens[i].start[0]:
                return True
    return False


def split_file(text: str) -> tuple[str, str] | str:
    """(prompt, oracle) for one file's text, or the reason it is dropped."""
    try:
        tokens = _code_tokens(text)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "not_python3_tokenizable"
    if not _imports_tensorflow_as_tf(tokens):
        return "no_import_tensorflow_as_tf"
    strings = [t.string for t in tokens]
    for i in range(len(tokens) - 5):
        if strings[i : i + 6] != ["tf", ".", "compat", ".", "v1", "."]:
            continue
        if i and strings[i - 1] == ".":
            continue  # `x.tf.compat.v1.` is not the tensorflow module
        tf_token = tokens[i]
        starts = _offsets(text)
        cut = starts[tf_token.end[0]] + tf_token.end[1]
        prompt = text[:cut]
        if "tf.compat.v1" in prompt:
            return "prefix_mentions_tf_compat_v1"
        # the suffix must be a dotted API call: tf . compat . v1 . NAME (. NAME)* (
        j = i + 5
        parts = []
        while j + 1 < len(tokens) and strings[j] == "." and tokens[j + 1].type == tokenize.NAME:
            parts.append(strings[j + 1])
            j += 2
        if not parts or j >= len(tokens) or strings[j] != "(":
            return "suffix_not_an_api_call"
        # tokens of the chain must be adjacent (no spaces/newlines inside the dotted path)
        if tokens[j - 1].end[0] != tf_token.start[0]:
            return "suffix_not_an_api_call"
        return prompt, ".compat.v1." + ".".join(parts)
    return "no_tf_compat_v1_in_code"


def build_tfv1real(
    folder: str | Path,
    count_tokens: Callable[[str], int] | None,
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
    limit: int | None = None,
) -> tuple[list[EvalItem], BuildReport]:
    """Items from every ``*.py`` under `folder` (sorted, recursive) and why others were dropped.

    `count_tokens(prompt)` measures prompt length in model tokens; pass None only to skip
    the length filter explicitly (recorded in the report).
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"{folder} is not a folder")
    report = BuildReport()
    items: list[EvalItem] = []
    seen_files: set[str] = set()
    seen_pairs: set[str] = set()
    if count_tokens is None:
        report.dropped["length_filter_skipped"] = 0
    for path in sorted(root.rglob("*.py")):
        if limit is not None and len(items) >= limit:
            break
        report.files += 1
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            report.dropped["unreadable"] += 1
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in seen_files:
            report.dropped["duplicate_file"] += 1
            continue
        seen_files.add(digest)
        outcome = split_file(text)
        if isinstance(outcome, str):
            report.dropped[outcome] += 1
            continue
        prompt, oracle = outcome
        pair = hashlib.sha256((prompt + "\0" + oracle).encode("utf-8")).hexdigest()
        if pair in seen_pairs:
            report.dropped["duplicate_example"] += 1
            continue
        if count_tokens is not None and count_tokens(prompt) > max_prompt_tokens:
            report.dropped["prompt_too_long"] += 1
            continue
        seen_pairs.add(pair)
        relative = path.relative_to(root).as_posix()
        items.append(EvalItem(item_id=relative, prompt=prompt, oracle=oracle, meta={"file": relative, "sha256": digest}))
        report.kept += 1
    log.info("TFv1Real: %s", report.as_dict())
    return items, report


def load_tfv1real(path: str | Path) -> list[EvalItem]:
    """Items from a JSONL file of ``{"prefix": ..., "oracle": ...}`` lines."""
    return read_items_jsonl(path)


def load_or_build(
    source: str | Path,
    count_tokens: Callable[[str], int] | None,
    limit: int | None = None,
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
) -> tuple[list[EvalItem], dict]:
    """A JSONL file is loaded, a folder is built; returns items and a build summary."""
    source = Path(source)
    if source.is_dir():
        items, report = build_tfv1real(source, count_tokens, max_prompt_tokens=max_prompt_tokens, limit=limit)
        return items, {"built_from": str(source), **report.as_dict()}
    if source.is_file():
        items = load_tfv1real(source)
        return (items if limit is None else items[:limit]), {"loaded_from": str(source), "items": len(items)}
    raise ValueError(f"TFv1Real data {source} is neither a folder of .py files nor a JSONL file")


def iter_py_files(folder: str | Path) -> Iterable[Path]:
    return sorted(Path(folder).rglob("*.py"))
