#!/usr/bin/env bash
# Run `adaptrack-lsp complete` on each example with $MODEL (default: the README's model).
# Usage: scripts/demo.sh            (uses .venv/bin/python if present)
#        MODEL=tiny scripts/demo.sh (built-in offline model, no download)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
MODEL="${MODEL:-Qwen/Qwen2.5-Coder-1.5B}"
SAMPLES="${SAMPLES:-5}"
status=0
for example in examples/numpy2_removals.py examples/torch_linalg.py examples/tf_compat_v1.py; do
    echo "== $example (model $MODEL)"
    "$PY" -m adaptrack_lsp complete "$example" --model "$MODEL" --samples "$SAMPLES" --timeout-ms 120000
    code=$?
    if [ "$code" -eq 3 ]; then
        echo "demo: the model '$MODEL' could not be loaded; run with MODEL=tiny (built-in, offline) or MODEL=/path/to/local/model" >&2
        exit 3
    fi
    [ "$code" -eq 0 ] || status=$code
done
exit $status
