#!/usr/bin/env bash
# What benchmarks/gpu_decoding.py needs on a GPU machine without network (Python 3.12,
# torch, transformers, numpy, tokenizers and safetensors already there):
#   .gpu/tokenizer  the Qwen2-sized tokenizer (build_large_tokenizer(151_643)); building it
#                   needs a standard library larger than some machines have
#   .whl/           cp312 wheels of the project's other dependencies, at the versions
#                   installed in .venv
# Both folders are ignored by git; carry them to the GPU machine.  See README "GPU decoding".
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
mkdir -p .gpu .whl
if [ ! -f .gpu/tokenizer/tokenizer.json ]; then
  "$python" benchmarks/gpu_decoding.py --save-tokenizer .gpu/tokenizer
fi
for package in jedi parso tree-sitter tree-sitter-python pygls lsprotocol cattrs attrs lark tqdm httpx httpcore h11 packaging; do
  version=$("$python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$package")
  "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$package==$version"
done
ls .whl
