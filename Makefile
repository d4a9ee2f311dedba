# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv themselves.
# `make test` is the fast loop (no ml extra, no llama.cpp build; tests marked slow or ml
# deselected); `make test-all` installs the ml and cluster (Ray) extras and runs every test
# (what .ci/run runs).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Portable llama.cpp build: the native build crashes on quantized models on this CPU kind
# (see docs/llm.md, "Building llama-cpp-python"); pip's wheel cache ignores CMAKE_ARGS, so the flags never change.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF

.PHONY: demo test test-all lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.base-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.base-installed

$(VENV)/.ml-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test,ml,cluster]'
	touch $@ $(VENV)/.test-installed $(VENV)/.base-installed

demo: $(VENV)/.base-installed
	$(BIN)/rhythm demo

test: $(VENV)/.test-installed
	$(BIN)/python -m pytest -n 2 -m "not slow and not ml"

test-all: $(VENV)/.ml-installed
	$(BIN)/python -m pytest

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: $(VENV)/.ml-installed
	$(BIN)/pip install --quiet -e '.[bench]'
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
