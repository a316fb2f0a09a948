#!/usr/bin/env bash
# For each example, the same cursor completed unconstrained, constrained (greedy masking)
# and with AdapTrack, each marked valid or INVALID against the installed packages; a package
# an example imports that is not installed (TensorFlow, on a fresh clone) is checked against
# the API snapshot bundled with adaptrack-lsp, and the rows name it.
# Usage: scripts/demo.sh                         (built-in offline model; built on first use)
#        MODEL=Qwen/Qwen2.5-Coder-1.5B scripts/demo.sh   (a hub id, a local model folder, or a .gguf file on llama.cpp)
# Then `adaptrack-lsp check` reports the API uses in the examples that do not exist here.
# Uses .venv/bin/python if present.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
MODEL="${MODEL:-builtin}"
DECODERS="${DECODERS:-unconstrained,constrained,adaptrack}"
status=0
for example in examples/*.py; do
    echo "== $example"
    "$PY" -m adaptrack_lsp complete "$example" --model "$MODEL" --compare "$DECODERS" --bundled-snapshots --timeout-ms 120000
    code=$?
    if [ "$code" -eq 3 ]; then
        echo "demo: the model '$MODEL' could not be loaded; run without MODEL (the built-in offline model) or with MODEL=/path/to/a/local/model (or a .gguf file)" >&2
        exit 3
    fi
    [ "$code" -eq 0 ] || status=$code
done
# the code already written, checked the same way: every API use that does not exist in
# the installed versions (TensorFlow against the bundled snapshot where it is not installed)
echo "== adaptrack-lsp check examples/"
"$PY" -m adaptrack_lsp check examples/ --snapshot tensorflow
code=$?
[ "$code" -le 1 ] || status=$code  # 1: findings, which is what the examples are for
exit $status
