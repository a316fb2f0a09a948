"""Name-based factory for decoders.

`get_decoder("adaptrack", top_p_validity=0.99)` returns a ready decoder.  Every decoder
implements `Decoder.decode(lm, constraint, request) -> DecodeResult` on the shared
prefix tree.
"""

from __future__ import annotations

import importlib

from adaptrack_lsp.completion.decoders.base import (  # noqa: F401
    Counters,
    DecodeCancelled,
    Decoder,
    DecodeRequest,
    DecodeResult,
    Sample,
)

#: decoder name -> "module:Class" (imported on first use)
DECODERS: dict[str, str] = {
    "unconstrained": "adaptrack_lsp.completion.decoders.simple:UnconstrainedDecoder",
    "constrained": "adaptrack_lsp.completion.decoders.simple:ConstrainedDecoder",
    "adaptrack": "adaptrack_lsp.completion.decoders.adaptrack:AdapTrackDecoder",
    "asap": "adaptrack_lsp.completion.decoders.asap:ASApDecoder",
    "cars": "adaptrack_lsp.completion.decoders.cars:CARSDecoder",
    "rs": "adaptrack_lsp.completion.decoders.cars:RejectionSamplingDecoder",
    "ars": "adaptrack_lsp.completion.decoders.cars:AdaptiveRejectionSamplingDecoder",
    "rsft": "adaptrack_lsp.completion.decoders.cars:RejectionSamplingFirstTokenDecoder",
    "beam": "adaptrack_lsp.completion.decoders.beam:BeamDecoder",
    "map": "adaptrack_lsp.completion.decoders.map:MAPDecoder",
}


def decoder_names() -> list[str]:
    return list(DECODERS)


def get_decoder(name: str, **options) -> Decoder:
    """Instantiate a decoder by name; unknown names raise ValueError listing the known ones."""
    try:
        target = DECODERS[name]
    except KeyError:
        raise ValueError(f"unknown decoder {name!r}; choose one of: {', '.join(DECODERS)}") from None
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(**options)
