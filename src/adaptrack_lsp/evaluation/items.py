"""The evaluation item: one prompt, one oracle completion, and where it came from.

All datasets (TFv1, TFv1Real) produce `EvalItem`s; the runner decodes the text that
follows `prompt` and compares the predicted API chain with `oracle` exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class EvalItem:
    #: stable identifier (used to resume a run and to join results)
    item_id: str
    #: the document text up to the cursor (ends right after ``tf``)
    prompt: str
    #: the exact text that should follow the prompt, e.g. ``.compat.v1.losses.log_loss``
    oracle: str
    #: dataset-specific details (API path, source file, ...)
    meta: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_items_jsonl(items: Iterable[EvalItem], path: str | Path) -> int:
    """Write items as JSONL (``{"id", "prefix", "oracle", "meta"}``); returns the count."""
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for item in items:
            record = {"id": item.item_id, "prefix": item.prompt, "oracle": item.oracle, "meta": item.meta}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def read_items_jsonl(path: str | Path) -> list[EvalItem]:
    """Load ``{"prefix": ..., "oracle": ...}`` lines (optional ``id`` and ``meta``).

    Items without an id get ``line-N``.  A malformed line raises ValueError naming it.
    """
    items: list[EvalItem] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("prefix"), str) or not isinstance(
                record.get("oracle"), str
            ):
                raise ValueError(f"{path}:{number}: each line needs string fields 'prefix' and 'oracle'")
            item_id = str(record.get("id", f"line-{number}"))
            if item_id in seen:
                raise ValueError(f"{path}:{number}: duplicate id {item_id!r}")
            seen.add(item_id)
            meta = record.get("meta") or {}
            if not isinstance(meta, dict):
                raise ValueError(f"{path}:{number}: 'meta' must be an object")
            items.append(EvalItem(item_id, record["prefix"], record["oracle"], meta))
    return items


def _is_chain_char(char: str) -> bool:
    return char == "." or char == "_" or char.isalnum()


def chain_ended(generated: str, checked: int = 0) -> bool:
    """Stop rule for API completion: True once the text holds a character that is neither
    an identifier character nor ``.`` (``(``, space, newline, ...); the first `checked`
    characters are known to hold none."""
    return any(not _is_chain_char(char) for char in generated[checked:])


def predicted_chain(generated: str) -> str:
    """The dotted API chain a completion starts with (text up to the first character that
    is neither identifier nor ``.``)."""
    for index, char in enumerate(generated):
        if not _is_chain_char(char):
            return generated[:index]
    return generated
