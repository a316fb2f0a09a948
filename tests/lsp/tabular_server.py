"""A language server process whose model is an exact tabular LM (run as a script by
`test_syntax_constraint.py`): the real server, protocol and pipeline, with a model whose
favourite ghost text after ``x = foo(a `` closes one bracket too many."""

from __future__ import annotations

import numpy as np

TOKENS = ["<eos>", ")", "\n", "a", " ", "x", "=", "foo", "(", ",", "b", "y"]


def unbalanced_model():
    from adaptrack_lsp.completion.lm.tabular import TabularLM
    from adaptrack_lsp.vocab import Vocabulary

    vocab = Vocabulary.from_strings(TOKENS, eos="<eos>")
    index = {token: i for i, token in enumerate(TOKENS)}

    def conditional(path):
        probs = np.full(len(TOKENS), 1e-3)
        generated = tuple(TOKENS[i] for i in path)
        if generated == ():
            probs[index[")"]], probs[index["\n"]], probs[index["b"]] = 0.7, 0.1, 0.15
        elif generated == (")",):
            probs[index[")"]], probs[index["\n"]] = 0.5, 0.45
        else:
            probs[index["\n"]] = 0.95
        return probs / probs.sum()

    return TabularLM(vocab, conditional=conditional)


def main() -> int:
    from adaptrack_lsp.completion.service import CompletionService
    from adaptrack_lsp.lsp_server.server import create_server

    def service(settings, **kwargs):
        return CompletionService(
            settings, model_loader=lambda s, progress: unbalanced_model(), index_factory=lambda s, root: None, **kwargs
        )

    server = create_server(service_factory=service)
    server.start_io()
    return server.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
