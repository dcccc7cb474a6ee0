# Set-up and entry points. `make demo` and `make test` each install what they need first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# a portable llama.cpp build (no -march=native), so a cached wheel runs on any x86-64 machine
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: install demo test check test-fast bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "installing .[local,dev,ray,studio] into $(VENV): the first time, pip compiles llama.cpp for the embedded model (about 5 min on 2 idle cores)"
	$(BIN)/python -m pip install -q -e ".[local,dev,ray,studio]"
	touch $@

install: $(BIN)/.installed

## the main job, offline on the embedded defaults: the demo comparison of the built-in CRSs, runs/demo/report.html
demo: install
	$(BIN)/usersimcrs quickstart --output runs/demo

## the whole test suite, after lint, format, types and the import-layer contracts; one pytest worker per CPU (pytest-xdist)
test: install check
	$(BIN)/python -m pytest -q -n auto

## ruff (lint and format), mypy, import-linter (the layer order of docs/design.md)
check: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test-fast: install
	$(BIN)/python -m pytest -q -n auto -m "not embedded and not slow"

bench: install
	$(BIN)/python -m benchmarks --quick

clean:
	rm -rf runs .pytest_cache
