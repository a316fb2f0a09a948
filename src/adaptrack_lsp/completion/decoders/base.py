"""The decoder interface and typed decoder options.

`Decoder.decode(lm, constraint, request) -> DecodeResult`.  Every decoder runs on the
shared prefix tree (`completion/tree.py`); none calls the model directly or keeps its
own copy of the sampling mechanics.  Each decoder declares its options as a frozen
dataclass (`DecoderOptions`); values from settings, the command line or a request are
checked against it, and a bad one raises `OptionError` naming the decoder and option.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from adaptrack_lsp.completion.decoding import (  # noqa: F401  (re-exported)
    Counters,
    DecodeCancelled,
    DecodeRequest,
    DecodeResult,
    Sample,
    Stopwatch,
)


class OptionError(ValueError):
    """A decoder option has an unknown name or a bad value (the message names it)."""


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"expected a finite number, got {value!r}")
    return float(value)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


_KINDS: dict[str, Callable[[Any], Any]] = {"int": _integer, "float": _number, "bool": _boolean}


def option(default: Any, kind: str, check: Callable[[Any], str | None] | None = None, nullable: bool = False) -> Any:
    """A dataclass field of a `DecoderOptions`: its kind ("int", "float", "bool"),
    whether null is allowed, and a check returning a reason when a value is out of range."""
    return field(default=default, metadata={"kind": kind, "check": check, "nullable": nullable})


def at_least(low: int) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"must be at least {low}"


def in_unit_interval(value: float) -> str | None:
    return None if 0.0 < value <= 1.0 else "must be in (0, 1]"


@dataclass(frozen=True)
class DecoderOptions:
    """Options of a decoder; subclasses add fields made with `option(...)`."""

    @classmethod
    def parse(cls, raw: Mapping[str, Any], decoder: str, base: DecoderOptions | None = None):
        """Options from `raw` laid over `base` (or the defaults); raises `OptionError`."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        changes: dict[str, Any] = {}
        for name, value in raw.items():
            where = f"decoder {decoder}, option {name!r}"
            spec = fields.get(name)
            if spec is None:
                known = ", ".join(fields) or "none"
                raise OptionError(f"{where}: unknown option (options of {decoder}: {known})")
            if value is None:
                if not spec.metadata["nullable"]:
                    raise OptionError(f"{where}: must not be null")
                changes[name] = None
                continue
            try:
                checked = _KINDS[spec.metadata["kind"]](value)
            except TypeError as error:
                nullable = " or null" if spec.metadata["nullable"] else ""
                raise OptionError(f"{where}: {error}{nullable}") from None
            reason = spec.metadata["check"](checked) if spec.metadata["check"] else None
            if reason:
                raise OptionError(f"{where}: {value!r} {reason}")
            changes[name] = checked
        return dataclasses.replace(base if base is not None else cls(), **changes)


@dataclass(frozen=True)
class NoOptions(DecoderOptions):
    pass


@dataclass(frozen=True)
class SharedOptions(DecoderOptions):
    #: the k samples of one request share one prefix tree (log-probabilities, validity, Q)
    share_estimates: bool = option(True, "bool")


class Decoder(ABC):
    """A decoding method; options come from the factory and may be overridden per request."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[DecoderOptions]] = NoOptions
    #: what its samples follow, for documentation and tests: "exact" (P(s | c) per
    #: sample, fresh tree or shared), "converges" (P(s | c) only as shared estimates
    #: converge), "distorted" (not P(s | c)), "model" (P(s), the constraint ignored),
    #: "search" (deterministic search, no sampling)
    exactness: ClassVar[str] = ""

    def __init__(self, **options: Any):
        self.options = self.Options.parse(options, self.name)

    def options_for(self, request: DecodeRequest):
        """The decoder's options with the request's overrides applied (checked)."""
        if not request.options:
            return self.options
        return self.Options.parse(request.options, self.name, base=self.options)

    @abstractmethod
    def decode(self, lm, constraint, request: DecodeRequest) -> DecodeResult: ...
