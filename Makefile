# Set-up and entry points. `make demo` and `make test` each install what they need first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# a portable llama.cpp build (no -march=native), so a cached wheel runs on any x86-64 machine
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: install demo test check test-fast bench clean

## --no-compile: Python writes the bytecode of the modules a run imports when it first imports them, instead of
## pip compiling all 1.4 GB of dependencies up front (44 s instead of 78 s for this install, 2026-11-28)
$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "installing .[local,dev,ray,studio] into $(VENV): the first time, pip compiles llama.cpp for the embedded model (about 5 min on 2 idle cores)"
	$(BIN)/python -m pip install -q --no-compile -e ".[local,dev,ray,studio]"
	touch $@

install: $(BIN)/.installed

## the main job, offline on the embedded defaults: the demo comparison of the built-in CRSs, runs/demo/report.html
demo: install
	$(BIN)/usersimcrs quickstart --output runs/demo

## the whole test suite with lint, format, types and the import-layer contracts (`make check`): one pytest worker
## per CPU (pytest-xdist; a worker that runs out of tests takes queued ones from the other, so both end together).
## mypy (about 40 s on a fresh clone) runs beside the tests at the lowest CPU priority: it fills the time the
## tests leave a core idle instead of going before them; its report follows theirs and either failing fails.
test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@log=$$(mktemp); nice -n 19 $(BIN)/mypy >$$log 2>&1 & types=$$!; \
	$(BIN)/python -m pytest -q -n auto --dist worksteal; tests=$$?; \
	wait $$types; typed=$$?; echo "$(BIN)/mypy"; cat $$log; rm -f $$log; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

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
