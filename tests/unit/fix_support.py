"""An exact tabular model and an API snapshot for the quick-fix tests (`test_fixes.py`,
and the language server of `tests/lsp/fix_server.py`).

The package ``mylib`` (a snapshot: nothing is imported) has ``prod``, ``zeros``,
``float64`` and ``hist``; ``product`` is gone.  After ``ml.`` the model prefers the
member that no longer exists, then ``zeros`` over ``prod``; with fill-in-the-middle
tokens its preference follows the suffix it is shown.
"""

from __future__ import annotations

import numpy as np

TOKENS = [
    "<eos>", "import", " ", "mylib", "as", "ml", "\n", "v", "=", "2", "x", "y", ".", "product", "prod", "zeros",
    "float64", "hist", "(", ")", "*", ",", "axis", "1", "normed", "density", "bins", "True", "<PRE>", "<SUF>", "<MID>",
]  # fmt: skip
INDEX = {token: i for i, token in enumerate(TOKENS)}
#: the members of mylib, and their signatures (what the checker and the constraint know)
NAMES = ["mylib.prod", "mylib.zeros", "mylib.float64", "mylib.hist"]
SIGNATURES = {
    "mylib.prod()": ["a", "axis"],
    "mylib.zeros()": ["shape"],
    "mylib.float64()": ["x"],
    "mylib.hist()": ["a", "bins", "density"],
}
#: after ``ml.``: the model's next member (the rest of the mass on tokens no chain takes)
MEMBERS = {"product": 0.5, "zeros": 0.2, "prod": 0.15, "float64": 0.1}
#: with the suffix (FIM) ``(v) * 2`` the model prefers prod; with any other suffix, zeros
MEMBERS_FIM_TIMES = {"product": 0.5, "prod": 0.3, "zeros": 0.1, "float64": 0.05}
#: after ``ml.hist(v, ``: the keyword names
KEYWORDS = {"normed": 0.5, "bins": 0.35, "density": 0.15}


def snapshot_index():
    from adaptrack_lsp.apis.snapshot import SnapshotIndex, names_to_snapshot

    return SnapshotIndex(data=names_to_snapshot("mylib", "2.0", NAMES, signatures=SIGNATURES))


def distribution(weights: dict[str, float]) -> np.ndarray:
    """Probabilities over TOKENS: `weights`, the rest spread evenly over the tokens not named
    (EOS and the FIM tokens excepted)."""
    probs = np.zeros(len(TOKENS))
    for token, weight in weights.items():
        probs[INDEX[token]] = weight
    rest = [i for i, token in enumerate(TOKENS) if token not in weights and token not in ("<eos>", "<PRE>", "<SUF>", "<MID>")]
    left = 1.0 - probs.sum()
    probs[rest] += left / len(rest)
    return probs


def fix_model(fim: bool = False):
    """The exact model of the tests: `conditional(path)` reads the prompt it was given
    (`lm.prompt`) to tell a keyword's place from an expression's."""
    from adaptrack_lsp.completion.context import FIMFormat
    from adaptrack_lsp.completion.lm.tabular import TabularLM
    from adaptrack_lsp.vocab import Vocabulary

    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")
    lm = None

    def conditional(path):
        prompt = [TOKENS[i] for i in lm.prompt]
        generated = [TOKENS[i] for i in path]
        if prompt[-4:] == ["(", "v", ",", " "] or prompt[-1:] == ["(",]:  # an argument's start: a keyword name
            if not generated:
                return distribution(KEYWORDS)
            return distribution({"=": 0.9})
        if not generated:
            return distribution({"ml": 0.8, "x": 0.1, "2": 0.05})
        if generated == ["ml"]:
            return distribution({".": 0.95})
        if generated == ["ml", "."]:
            if fim and "*" in prompt[prompt.index("<SUF>") :]:
                return distribution(MEMBERS_FIM_TIMES)
            return distribution(MEMBERS)
        if len(generated) == 3 and generated[:2] == ["ml", "."]:
            return distribution({"<eos>": 0.9} if fim else {"(": 0.9})
        return distribution({"\n": 0.5})

    lm = TabularLM(vocab, conditional=conditional)
    if fim:
        lm.fim_format = FIMFormat("test", INDEX["<PRE>"], INDEX["<SUF>"], INDEX["<MID>"])
    return lm
