"""`adaptrack-lsp eval`: headless evaluation on TFv1, TFv1Real and DSL tasks (paper §6), and
GitChameleon 2.0 (the API constraint against execution in pinned environments).

Writes ``results.jsonl`` (one line per item and decoder; a rerun skips finished ones),
``summary.json``, ``table.md`` (shaped like the paper's tables) and PNG plots to --out.
"""

from __future__ import annotations

from adaptrack_lsp.config import model_argument

HELP = "headless evaluation: TFv1 / TFv1Real exact match, DSL exactness, GitChameleon, with tables and plots"

DATASETS = ("tfv1", "tfv1real", "dsl", "gitchameleon")
DEFAULT_API_DECODERS = "unconstrained,constrained,adaptrack"
DEFAULT_DSL_DECODERS = "constrained,asap,adaptrack"


def add_arguments(parser) -> None:
    parser.add_argument(
        "dataset", choices=DATASETS, help="tfv1 (paper §6.1), tfv1real (§6.2), dsl (§6.4) or gitchameleon (docs/versions.md)"
    )
    parser.add_argument(
        "--model",
        default=None,
        type=model_argument,
        help="'simulated' (the simulated-intent LM, no weights), 'builtin' (offline), 'tiny', a local model folder or a hub id "
        "(required for tfv1/tfv1real; dsl tasks carry their own tabular LM; gitchameleon: generated solutions, optional)",
    )
    parser.add_argument(
        "--decoders",
        default=None,
        help=f"comma-separated decoders (default {DEFAULT_API_DECODERS}; dsl: {DEFAULT_DSL_DECODERS}; "
        "gitchameleon: unconstrained,constrained,adaptrack,exact)",
    )
    parser.add_argument(
        "--samples", type=int, default=None, help="sampled decodes per item (default 20; dsl: 100 per task; gitchameleon: 5)"
    )
    parser.add_argument(
        "--setting",
        choices=("v1", "v2", "both"),
        default="both",
        help="TFv1 setting: v1 (constraint: compat.v1 names without the prefix), v2 (all TF 2 names), or both",
    )
    parser.add_argument(
        "--data",
        default=None,
        help="tfv1real: a folder of .py files (built into a dataset) or a JSONL of {prefix, oracle}; "
        "dsl: a task file or a folder of task files (default: the binary task); "
        "gitchameleon: the benchmark's dataset folder (dataset.jsonl, hidden_tests/), never downloaded",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--api-snapshot", default=None, help="API snapshot JSON (default: the committed TF snapshot)")
    source.add_argument("--python", default=None, help="take the TensorFlow API from this interpreter's environment")
    parser.add_argument("--limit", type=int, default=None, help="evaluate only the first N items")
    parser.add_argument("--out", required=True, help="output folder (an existing run there is resumed)")
    parser.add_argument("--seed", type=int, default=0, help="base random seed (default 0)")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="token limit per completion (default 64; gitchameleon: 128; dsl --grammar: the length cap of the enumerated P(s|c), default 16)",
    )
    parser.add_argument(
        "--grammar",
        default=None,
        metavar="G.lark",
        help="dsl: constrain each task's LM with this grammar alone (.lark, .regex or a .json schema); "
        "task files may leave out 'valid'",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per decode before it is cut (default 60)")
    parser.add_argument("--max-prompt-tokens", type=int, default=3584, help="tfv1real: drop longer prompts (default 3584)")
    parser.add_argument("--device", default=None, help="model device: auto, cpu, cuda, cuda:1, mps")
    parser.add_argument("--dtype", default=None, help="model dtype: auto, bfloat16, float16, float32")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="DECODER.KEY=VALUE",
        help="decoder option, e.g. adaptrack.max_backtrack_distance=4 (repeatable)",
    )
    parser.add_argument("--libraries", default=None, help="gitchameleon: only the records of these libraries (comma-separated)")
    parser.add_argument(
        "--tests",
        choices=("hidden", "visible"),
        default="hidden",
        help="gitchameleon: ground truth from the hidden pytest files (default) or the visible test",
    )
    parser.add_argument(
        "--constraints", default=None, help="gitchameleon: constraint parts checked (default api,kwargs; see `explain --constraints`)"
    )
    parser.add_argument(
        "--run-timeout", type=float, default=240.0, help="gitchameleon: seconds per test run in an environment (default 240, the benchmark's)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    import sys

    from adaptrack_lsp.extras import MissingExtra, require

    try:  # every run ends in plots (matplotlib)
        require("eval", "eval", only=("matplotlib",))
    except MissingExtra as error:
        print(f"adaptrack-lsp eval: error: {error}", file=sys.stderr)
        return 2
    from adaptrack_lsp.evaluation.cli import run_eval

    return run_eval(args)
