"""Keyword arguments removed or renamed in numpy, pandas, scikit-learn, TensorFlow, torch
and matplotlib, checked against the versions installed here (goals: every removed name
rejected and every current name accepted wherever the signature is known; <= 20 us per
check).

Each case is a call as user code writes it (``tf.nn.dropout(x, ``), a keyword the
library removed or renamed (``keep_prob``) and a keyword it takes now (``rate``; for a
keyword removed without a successor, another current parameter of the same call).  The
signatures come from the interpreter running this script, through the API index the
server uses (`JediIndex` on an explicitly named interpreter, so runtime introspection is
allowed; ``--mode jedi``: static analysis only, as in an untrusted workspace).

Per case: whether the signature is known (a signature without ``**kwargs``), whether
``removed=1)`` is rejected and ``current=1)`` accepted after the call's prefix.
Figures, all from one run:

- `removed_rejected`: share of the removed names rejected, over the cases whose
  signature is known;
- `current_accepted`: share of the current names accepted, over the same cases;
- `check_us`: mean time of one `KeywordArguments.check` of such a text (``name=1)``)
  once the signature is loaded (the constraint's own cost);
- `known` (line before): cases with a known signature / all cases (`not_installed`: the
  libraries this interpreter lacks, whose cases are therefore unknown); `mask_ms`: median
  time of a fresh full-vocabulary mask inside a resolved call at a 120k-token
  vocabulary (full runs only).

`--smoke`: the numpy cases only (seconds).  The last line is
``removed_rejected=... current_accepted=... check_us=...``.

Usage: python benchmarks/kwargs.py [--smoke] [--mode runtime|jedi] [--repeats 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

#: (imports and set-up lines, call prefix as written, removed keyword, current keyword or None)
NUMPY = "import numpy as np\n"
PANDAS = "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\n"
SKLEARN = (
    "from sklearn.linear_model import LinearRegression, Ridge, Lasso, LogisticRegression\n"
    "from sklearn.preprocessing import OneHotEncoder\nfrom sklearn.cluster import KMeans\n"
    "from sklearn.ensemble import AdaBoostClassifier, BaggingClassifier, RandomForestClassifier\n"
    "from sklearn.manifold import TSNE\nfrom sklearn.metrics import mean_squared_error\n"
)
TENSORFLOW = "import tensorflow as tf\n"
TORCH = "import torch\n"
MATPLOTLIB = "import matplotlib\nimport matplotlib.pyplot as plt\n"

CASES = [
    ("numpy", NUMPY, "np.histogram(a, ", "normed", "density"),
    ("numpy", NUMPY, "np.histogramdd(a, ", "normed", "density"),
    ("numpy", NUMPY, "np.histogram2d(x, y, ", "normed", "density"),
    ("numpy", NUMPY, "np.genfromtxt(f, ", "skiprows", "skip_header"),
    ("numpy", NUMPY, "np.genfromtxt(f, ", "missing", "missing_values"),
    ("numpy", NUMPY, "np.percentile(a, 50, ", "interpolation", "method"),
    ("numpy", NUMPY, "np.quantile(a, 0.5, ", "interpolation", "method"),
    ("numpy", NUMPY, "np.nanpercentile(a, 50, ", "interpolation", "method"),
    ("numpy", NUMPY, "np.reshape(a, ", "newshape", "shape"),
    ("numpy", NUMPY, "np.correlate(a, v, ", "old_behavior", "mode"),
    ("numpy", NUMPY, "np.array2string(a, ", "style", "formatter"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "error_bad_lines", "on_bad_lines"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "warn_bad_lines", "on_bad_lines"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "squeeze", "usecols"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "prefix", "names"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "mangle_dupe_cols", "dtype"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "date_parser", "date_format"),
    ("pandas", PANDAS, "pd.read_csv(path, ", "delim_whitespace", "sep"),
    ("pandas", PANDAS, "pd.read_table(path, ", "error_bad_lines", "on_bad_lines"),
    ("pandas", PANDAS, "pd.read_excel(path, ", "squeeze", "usecols"),
    ("pandas", PANDAS, "pd.concat(frames, ", "join_axes", "join"),
    ("pandas", PANDAS, "pd.to_datetime(s, ", "infer_datetime_format", "format"),
    ("pandas", PANDAS, "pd.read_json(path, ", "numpy", "orient"),
    ("pandas", PANDAS, "df.to_csv(path, ", "line_terminator", "lineterminator"),
    ("pandas", PANDAS, "df.groupby('a', ", "squeeze", "sort"),
    ("pandas", PANDAS, "df.set_axis(labels, ", "inplace", "axis"),
    ("pandas", PANDAS, "df.resample('D', ", "loffset", "origin"),
    ("pandas", PANDAS, "df.fillna(", "method", "value"),
    ("scikit-learn", SKLEARN, "LinearRegression(", "normalize", "fit_intercept"),
    ("scikit-learn", SKLEARN, "Ridge(", "normalize", "alpha"),
    ("scikit-learn", SKLEARN, "Lasso(", "normalize", "alpha"),
    ("scikit-learn", SKLEARN, "OneHotEncoder(", "sparse", "sparse_output"),
    ("scikit-learn", SKLEARN, "KMeans(", "n_jobs", "n_init"),
    ("scikit-learn", SKLEARN, "KMeans(", "precompute_distances", "algorithm"),
    ("scikit-learn", SKLEARN, "AdaBoostClassifier(", "base_estimator", "estimator"),
    ("scikit-learn", SKLEARN, "BaggingClassifier(", "base_estimator", "estimator"),
    ("scikit-learn", SKLEARN, "RandomForestClassifier(", "min_impurity_split", "min_impurity_decrease"),
    ("scikit-learn", SKLEARN, "TSNE(", "n_iter", "max_iter"),
    ("scikit-learn", SKLEARN, "LogisticRegression(", "multi_class", "solver"),
    ("scikit-learn", SKLEARN, "mean_squared_error(y, p, ", "squared", "multioutput"),
    ("tensorflow", TENSORFLOW, "tf.nn.dropout(x, ", "keep_prob", "rate"),
    ("tensorflow", TENSORFLOW, "tf.reduce_sum(x, ", "keep_dims", "keepdims"),
    ("tensorflow", TENSORFLOW, "tf.reduce_sum(x, ", "reduction_indices", "axis"),
    ("tensorflow", TENSORFLOW, "tf.reduce_mean(x, ", "keep_dims", "keepdims"),
    ("tensorflow", TENSORFLOW, "tf.reduce_max(x, ", "keep_dims", "keepdims"),
    ("tensorflow", TENSORFLOW, "tf.argmax(x, ", "dimension", "axis"),
    ("tensorflow", TENSORFLOW, "tf.nn.softmax(x, ", "dim", "axis"),
    ("tensorflow", TENSORFLOW, "tf.squeeze(x, ", "squeeze_dims", "axis"),
    ("tensorflow", TENSORFLOW, "tf.expand_dims(x, ", "dim", "axis"),
    ("tensorflow", TENSORFLOW, "tf.nn.conv2d(x, w, 1, 'SAME', ", "use_cudnn_on_gpu", "data_format"),
    ("tensorflow", TENSORFLOW, "tf.nn.conv2d(x, ", "filter", "filters"),
    ("tensorflow", TENSORFLOW, "tf.nn.moments(x, [0], ", "keep_dims", "keepdims"),
    ("tensorflow", TENSORFLOW, "tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=z, ", "dim", "axis"),
    ("torch", TORCH, "torch.onnx.export(model, args, path, ", "example_outputs", "dynamo"),
    ("torch", TORCH, "torch.onnx.export(model, args, path, ", "enable_onnx_checker", "opset_version"),
    ("torch", TORCH, "torch.onnx.export(model, args, path, ", "use_external_data_format", "external_data"),
    ("torch", TORCH, "torch.optim.lr_scheduler.StepLR(opt, 10, ", "verbose", "gamma"),
    ("torch", TORCH, "torch.optim.lr_scheduler.ReduceLROnPlateau(opt, ", "verbose", "patience"),
    ("torch", TORCH, "torch.optim.lr_scheduler.CosineAnnealingLR(opt, 10, ", "verbose", "eta_min"),
    ("torch", TORCH, "torch.optim.lr_scheduler.ExponentialLR(opt, 0.9, ", "verbose", "last_epoch"),
    ("matplotlib", MATPLOTLIB, "matplotlib.use('Agg', ", "warn", "force"),
    ("matplotlib", MATPLOTLIB, "plt.gca(", "projection", None),
    ("matplotlib", MATPLOTLIB, "plt.tight_layout(", "renderer", "pad"),
    ("matplotlib", MATPLOTLIB, "plt.boxplot(data, ", "labels", "tick_labels"),
    ("matplotlib", MATPLOTLIB, "plt.boxplot(data, ", "manage_xticks", "manage_ticks"),
    ("matplotlib", MATPLOTLIB, "plt.stem(x, y, ", "use_line_collection", "orientation"),
]
#: removed keywords that a ``**kwargs`` parameter takes (the call fails later, at
#: runtime, in the library): not rejected, listed to show where the check stops
KWARGS_CASES = [
    ("matplotlib", MATPLOTLIB, "plt.hist(x, ", "normed", "density"),
    ("matplotlib", MATPLOTLIB, "plt.grid(", "b", "visible"),
    ("matplotlib", MATPLOTLIB, "plt.legend(", "ncol", "ncols"),
]


def run_cases(index, cases, repeats: int):
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.call_arguments import KeywordArguments

    rows, timings = [], []
    for package, imports, call, removed, current in cases:
        document = imports + "y = " + call
        constrainer = KeywordArguments(index)
        state = constrainer.start(ConstraintContext(document, document))
        frames = state[4]
        key = frames[-1][0] if frames else None
        signature = constrainer.signature(key) if key is not None else None
        known = signature is not None and not signature.any_keyword
        removed_text, current_text = f"{removed}=1)", (f"{current}=1)" if current else None)
        rejected = constrainer.check(state, removed_text) is None
        accepted = constrainer.check(state, current_text) is not None if current_text else None
        reason = constrainer.rejection(state, removed_text[: len(removed) + 2]) if rejected else ""
        for text in filter(None, (removed_text, current_text)):
            started = time.perf_counter()
            for _ in range(repeats):
                constrainer.check(state, text)
            timings.append((time.perf_counter() - started) / repeats)
        rows.append((package, call + f"{removed}=…", current, known, rejected, accepted, reason, signature))
    return rows, timings


def mask_median_ms(index, repeats: int) -> float:
    """Median fresh mask inside resolved calls at a 120k-token vocabulary."""
    from adaptrack_lsp.completion.lm.tiny import build_large_tokenizer
    from adaptrack_lsp.completion.tokenizer_bytes import vocabulary_from_tokenizer
    from adaptrack_lsp.constrainers.api import ConstraintContext
    from adaptrack_lsp.constrainers.call_arguments import KeywordArguments
    from adaptrack_lsp.constrainers.token_index import TokenIndex

    vocab = vocabulary_from_tokenizer(build_large_tokenizer(120_000))
    times = []
    for prefix in ("y = np.histogram(a, ", "y = np.histogram(a, norm", "y = np.histogram(a, normed=", "y = np.histogram(a, bins=[1, 2", "y = 1 + "):
        document = NUMPY + prefix
        token_index = TokenIndex(KeywordArguments(index), vocab, context=ConstraintContext(document, document))
        state = token_index.initial_state()
        token_index.mask(state)  # per-vocabulary tables and the signature, once
        for _ in range(repeats):
            token_index.clear_caches()
            started = time.perf_counter()
            token_index.compute_mask(state)
            times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


IMPORT_NAMES = {"scikit-learn": "sklearn"}


def not_installed(packages: list[str]) -> list[str]:
    """The case packages this interpreter cannot import (distribution names)."""
    import importlib.util

    return [name for name in packages if importlib.util.find_spec(IMPORT_NAMES.get(name, name)) is None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="numpy cases only (seconds)")
    parser.add_argument("--mode", choices=("runtime", "jedi"), default="runtime", help="where signatures come from")
    parser.add_argument("--repeats", type=int, default=200, help="checks timed per text")
    args = parser.parse_args()

    from adaptrack_lsp.apis.jedi_index import JediIndex

    cases = [case for case in CASES if case[0] == "numpy"] if args.smoke else CASES
    repeats = 20 if args.smoke else args.repeats
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="adaptrack-kwargs-") as cache:
        index = JediIndex(
            python=sys.executable,
            runtime_introspection=args.mode == "runtime",
            cache_dir=cache,
            timeout_s=600,
            runtime_timeout_s=600,
        )
        try:
            rows, timings = run_cases(index, cases, repeats)
            extra_rows, _ = run_cases(index, [] if args.smoke else KWARGS_CASES, 1)
            mask_ms = None if args.smoke else mask_median_ms(index, repeats=5)
            versions = index.packages()
        finally:
            index.close()
    print(f"# signatures from {args.mode}; installed: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))
    print("| package | call | current | signature known | removed rejected | current accepted |")
    print("|---|---|---|---|---|---|")
    for package, call, current, known, rejected, accepted, _reason, _signature in rows + extra_rows:
        accepted_text = "—" if accepted is None else ("yes" if accepted else "NO")
        print(f"| {package} | `{call}` | `{current or '—'}` | {'yes' if known else 'no (**kwargs or none)'} | {'yes' if rejected else 'NO'} | {accepted_text} |")
    for row in rows:
        if row[6]:
            print(f"# {row[6]}")
    missing = not_installed(sorted({row[0] for row in rows}))
    if missing:  # their cases count as unknown: say so rather than let the rates shrink quietly
        print("# not installed here, so their cases are unknown: " + ", ".join(missing))
    known_rows = [row for row in rows if row[3]]
    with_current = [row for row in known_rows if row[5] is not None]
    removed_rejected = sum(row[4] for row in known_rows) / max(1, len(known_rows))
    current_accepted = sum(bool(row[5]) for row in with_current) / max(1, len(with_current))
    check_us = 1e6 * statistics.mean(timings)
    print(
        f"known={len(known_rows)}/{len(rows)} cases={len(rows)} check_us_median={1e6 * statistics.median(timings):.2f} "
        + (f"mask_ms={mask_ms:.2f} " if mask_ms is not None else "")
        + f"seconds={time.perf_counter() - started:.1f} mode={args.mode} not_installed={','.join(missing) or 'none'}"
    )
    print(f"removed_rejected={removed_rejected:.3f} current_accepted={current_accepted:.3f} check_us={check_us:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
