"""Headless evaluation (AdapTrack paper §6): datasets, metrics, the runner, reports and plots.

- `tfv1`: TFv1 from a TensorFlow API snapshot (§6.1); `tfv1real`: TFv1Real from real files (§6.2);
  `dsl`: exactness on task files, KL divergence to P(s|c) (§6.4);
- `simulated`: the simulated-intent LM (an exact LM over weighted candidate strings);
- `metrics`: EM@k (eq. 5), LM-call statistics, latency, KL;
- `runner`, `report`, `cli`: the `adaptrack-lsp eval` loop, summaries, tables, plots.
"""
