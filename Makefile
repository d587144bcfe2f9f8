# The two commands of the README: `make serve` runs the kernel, `make test` passes the tests.
# Both create .venv and install the project (pinned by constraints.txt) on first use.
PYTHON ?= python3
VENV := .venv
# Bytecode caches on, whatever the shell says: with PYTHONDONTWRITEBYTECODE set, pytest re-rewrites the
# asserts of every test module and plugin in each xdist worker (7 s of a 11 s collection here), and every
# `brain` subprocess the tests start compiles the kernel's sources again.
unexport PYTHONDONTWRITEBYTECODE
BIN := $(VENV)/bin

.PHONY: serve test bench clean

serve: $(VENV)/.installed
	$(BIN)/brain serve

# vulture: dead code in services/, brain-ops/ and migrations/ (settings in pyproject.toml's [tool.vulture]).
test: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/vulture
	$(BIN)/pytest

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .brain .pytest_cache
