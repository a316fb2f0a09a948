"""Name-based factory for decoders.

`get_decoder("adaptrack", top_p_validity=0.99)` returns a ready decoder (options are
checked against the decoder's option dataclass; a bad one raises `OptionError`).  Every
decoder implements `Decoder.decode(lm, constraint, request) -> DecodeResult` on the
shared prefix tree.
"""

from __future__ import annotations

import dataclasses

from adaptrack_lsp.completion.decoders.adaptrack import AdapTrackDecoder
from adaptrack_lsp.completion.decoders.asap import ASApDecoder
from adaptrack_lsp.completion.decoders.base import (  # noqa: F401
    Counters,
    DecodeCancelled,
    Decoder,
    DecodeRequest,
    DecodeResult,
    DecoderOptions,
    OptionError,
    Sample,
)
from adaptrack_lsp.completion.decoders.beam import BeamDecoder
from adaptrack_lsp.completion.decoders.cars import (
    AdaptiveRejectionSamplingDecoder,
    CARSDecoder,
    RejectionSamplingDecoder,
    RejectionSamplingFirstTokenDecoder,
)
from adaptrack_lsp.completion.decoders.exact import ExactDecoder
from adaptrack_lsp.completion.decoders.map import MAPDecoder
from adaptrack_lsp.completion.decoders.simple import ConstrainedDecoder, UnconstrainedDecoder
from adaptrack_lsp.config import DECODER_NAMES

#: decoder name -> class, in the order of `DECODER_NAMES`
DECODERS: dict[str, type[Decoder]] = {
    cls.name: cls
    for cls in (
        UnconstrainedDecoder,
        ConstrainedDecoder,
        AdapTrackDecoder,
        ExactDecoder,
        ASApDecoder,
        CARSDecoder,
        RejectionSamplingDecoder,
        AdaptiveRejectionSamplingDecoder,
        RejectionSamplingFirstTokenDecoder,
        BeamDecoder,
        MAPDecoder,
    )
}
assert tuple(DECODERS) == DECODER_NAMES, "DECODER_NAMES and the registry disagree"


def decoder_names() -> list[str]:
    return list(DECODERS)


def get_decoder(name: str, **options) -> Decoder:
    """Instantiate a decoder by name; unknown names raise ValueError listing the known ones."""
    return get_decoder_class(name)(**options)


def decoder_for(name: str, settings) -> Decoder:
    """The decoder `name` with the options `settings` give it (only the options its
    option dataclass declares: `constrained` has no `top_p_validity`)."""
    wanted = {
        "top_p_validity": settings.top_p_validity,
        "max_backtrack_distance": settings.max_backtrack_distance,
        "share_estimates": True,
    }
    accepted = {option.name for option in dataclasses.fields(get_decoder_class(name).Options)}
    return get_decoder(name, **{key: value for key, value in wanted.items() if key in accepted})


def get_decoder_class(name: str) -> type[Decoder]:
    try:
        return DECODERS[name]
    except KeyError:
        raise ValueError(f"unknown decoder {name!r}; choose one of: {', '.join(DECODERS)}") from None
