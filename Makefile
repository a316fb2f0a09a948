# adaptrack-lsp: `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION ?= 2.13.0
MODEL ?= builtin

.PHONY: venv install install-dev llama-cpp npm demo test test-python bench dist clean

# the one version number (src/adaptrack_lsp/__init__.py); the extension's package.json must agree
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' src/adaptrack_lsp/__init__.py)

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# torch's CPU build first, pinned, so that no dependency of the dev extras (transformers)
# pulls the multi-GB CUDA build; the light core needs no torch
venv: $(PY)
	$(PIP) install -q "torch==$(TORCH_VERSION)"

# the light core: the server, the built-in model and the constraints; no torch, no transformers
install: $(PY)
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
	$(PY) benchmarks/core_install.py
	$(PY) benchmarks/cross_file.py

# release artifacts in dist/: the wheel, the sdist, and the VS Code extension carrying the
# wheel (it sets up a private environment from it: docs/editors.md)
dist: $(PY) npm
	@test "$$(node -p "require('./vscode-client/package.json').version")" = "$(VERSION)" || \
		{ echo "dist: vscode-client/package.json's version is not $(VERSION) (src/adaptrack_lsp/__init__.py)" >&2; exit 1; }
	$(PIP) install -q "build>=1.2"
	rm -rf dist vscode-client/server
	$(PY) -m build --sdist --wheel --outdir dist .
	rm -rf src/*.egg-info
	mkdir -p vscode-client/server
	cp dist/adaptrack_lsp-$(VERSION)-py3-none-any.whl vscode-client/server/
	npm run package
	cp vscode-client/dist/adaptrack.vsix dist/adaptrack-$(VERSION).vsix
	rm -rf vscode-client/server
	@ls -l dist

clean:
	rm -rf $(VENV) build dist src/*.egg-info node_modules vscode-client/server
