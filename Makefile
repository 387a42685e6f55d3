# heroeval: everything the project needs is installed by these targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

# the codebase figures held at their targets (scripts/codebase_figures.py): no private name imported across
# subpackages, heroeval.__all__ <= 25, no sys.path edits in benchmarks/ and experiments/, the EM settings' key
# list written once, README <= 250 lines, modules <= 800 lines (numba kernel modules <= 900), at most 10
# functions outside cli/ with 10 or more parameters (a **options group counts as one)
SHAPE_RULES := private,all,sys-path,em-keys,readme,kernel-size,module-size,signatures

.PHONY: demo test test-fast test-browser lint typecheck bench bench-install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

## make demo: create .venv, install heroeval, run the bundled example and write its HTML report
demo: $(VENV)/.installed
	$(BIN)/hero demo --report demo-report.html

## make test: create .venv, install with test extras, lint, type-check, run the whole suite
test: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks experiments scripts
	$(BIN)/lint-imports
	$(BIN)/python scripts/codebase_figures.py --require $(SHAPE_RULES)
	$(BIN)/mypy
	$(BIN)/python -m pytest

## make test-fast: the suite without the slow Monte-Carlo checks
test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not slow"

## make test-browser: the headless-Chromium test of the HTML report (needs Debian's chromium: apt-get install -y chromium)
test-browser: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/browser -v

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests benchmarks experiments scripts
	$(BIN)/lint-imports
	$(BIN)/ruff format --check src tests

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,benchmark]'
	touch $@ $(VENV)/.installed $(VENV)/.installed-test

## make bench-install: the benchmarks' extra peers (ppi_py for benchmarks/current_gold.py)
bench-install: $(VENV)/.installed-bench

## make bench: Stage A timing against crowd-kit (installs crowd-kit in its own venv)
bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks.stage_a

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache tests/browser/artifacts demo-report.html
