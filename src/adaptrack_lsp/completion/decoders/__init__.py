"""Name-based factory for decoders.

`get_decoder("adaptrack", top_p_validity=0.99)` returns a ready decoder (options are
checked against the decoder's option dataclass; a bad one raises `OptionError`).  Every
decoder implements `Decoder.decode(lm, constraint, request) -> DecodeResult` on the
shared prefix tree.
"""

from __future__ import annotations

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
from adaptrack_lsp.completion.decoding import DECODER_NAMES

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
    try:
        cls = DECODERS[name]
    except KeyError:
        raise ValueError(f"unknown decoder {name!r}; choose one of: {', '.join(DECODERS)}") from None
    return cls(**options)
