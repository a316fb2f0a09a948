"""MAP search against greedy AdapTrack for ghost text, on the built-in tiny model.

Both decoders complete the same numpy cursors (API-constrained by the installed numpy's
public names, token healing on, 8 new tokens, temperature 0), alternating, several
rounds; printed are the median wall time of each and how often the answers agree.  MAP
(`decoder: map`) guarantees argmax P(s | c); greedy AdapTrack is the ghost-text default.

    python benchmarks/map_search.py [--rounds 5]
    python benchmarks/map_search.py --smoke   # one round

Last line: `map_ms=… adaptrack_ms=… map_over_adaptrack=… same_answers=…`.
"""

from __future__ import annotations

import argparse
import statistics
import time

CURSORS = [
    "import numpy as np\nx = np.",
    "import numpy as np\ny = np.ar",
    "import numpy as np\ndef f(a):\n    return np.",
    "import numpy as np\nz = np.linalg.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one round (a run check)")
    args = parser.parse_args()
    if args.smoke:
        args.rounds = 1

    import numpy

    from adaptrack_lsp.apis.static_index import StaticIndex
    from adaptrack_lsp.completion.context import PromptBuilder
    from adaptrack_lsp.completion.decoders import get_decoder
    from adaptrack_lsp.completion.decoding import DecodeRequest
    from adaptrack_lsp.completion.lm.loading import load_model
    from adaptrack_lsp.constrainers.environment import token_constraint

    index = StaticIndex(f"numpy.{name}" for name in dir(numpy) if not name.startswith("_"))
    lm = load_model("tiny", device="cpu")
    builder = PromptBuilder.for_model(lm, max_new_tokens=8)
    walls: dict[str, list[float]] = {"map": [], "adaptrack": []}
    answers: dict[str, list[list[str]]] = {"map": [], "adaptrack": []}
    for _ in range(args.rounds):
        for text in CURSORS:
            plan = builder.build(text, len(text))
            for name in walls:
                constraint = token_constraint(
                    lm.vocab, index=index, document=text, prefix=plan.constraint_prefix,
                    forced_prefix=plan.heal_text, clean=True,
                )
                request = DecodeRequest(
                    prompt_ids=plan.prompt_ids, num_samples=1, temperature=0.0, max_new_tokens=8,
                    timeout_s=60.0, stop=plan.stop, cache_key="bench",
                )
                started = time.perf_counter()
                result = get_decoder(name).decode(lm, constraint, request)
                walls[name].append(time.perf_counter() - started)
                answers[name].append([sample.text for sample in result.samples])
    map_ms = 1000 * statistics.median(walls["map"])
    adaptrack_ms = 1000 * statistics.median(walls["adaptrack"])
    same = sum(a == b for a, b in zip(answers["map"], answers["adaptrack"])) / len(answers["map"])
    print(f"MAP search: median {map_ms:.1f} ms; greedy AdapTrack: median {adaptrack_ms:.1f} ms "
          f"({len(walls['map'])} decodes each); same answer in {same:.0%}")
    print(f"map_ms={map_ms:.1f} adaptrack_ms={adaptrack_ms:.1f} map_over_adaptrack={map_ms / adaptrack_ms:.3f} same_answers={same:.3f}")


if __name__ == "__main__":
    main()
