# adaptrack-lsp: `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
MODEL ?= builtin

.PHONY: venv install install-dev llama-cpp npm demo test test-python bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# torch first, pinned, so that no dependency pulls the multi-GB CUDA build
venv: $(PY)
	$(PIP) install -q "torch==$(TORCH_VERSION)"

install: venv
	$(PIP) install -q -e .

install-dev: venv
	$(PIP) install -q -e ".[dev]"

# llama.cpp for the engine tests: the llama-cpp-python wheel and llama-server, compiled once
# per machine (minutes) and cached under the cache root
llama-cpp: install-dev
	PY="$(PY)" .ci/install-llama-cpp

npm:
	npm ci --no-audit --no-fund

# each example's cursor completed unconstrained, constrained and with AdapTrack, marked
# valid or INVALID for the installed packages.  MODEL: builtin (offline, built on first
# use), a hub id, a local model folder or a .gguf file (llama.cpp); one that cannot be
# loaded stops with a message
demo: install
	MODEL="$(MODEL)" PY="$(PY)" scripts/demo.sh

test: install-dev llama-cpp npm
	$(PY) -m pytest -q -ra --durations=15

test-python: install-dev
	$(PY) -m pytest -q -ra --durations=15

# performance figures (minutes; not part of the tests)
bench: install-dev
	$(PY) benchmarks/constraint_mask.py
	$(PY) benchmarks/lsp_latency.py
	$(PY) benchmarks/decoding_overhead.py
	$(PY) benchmarks/cold_start.py
	$(PY) benchmarks/soak.py
	$(PY) benchmarks/map_search.py
	$(PY) benchmarks/kwargs.py
	$(PY) benchmarks/builtin_model.py
	$(PY) benchmarks/cross_file.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info node_modules
