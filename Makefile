# The two commands of the README: `make serve` runs the kernel, `make test` passes the tests.
# Both create .venv and install the project (pinned by constraints.txt) on first use, pip's progress shown:
# `make serve` only what serving needs (430 MB, 46 s from the index on a clean clone), `make test` the test
# extras on top (schemathesis, testcontainers, the deployment validators, selenium: 350 MB more).
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
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/vulture
	$(BIN)/pytest

# The version is written in brain_kernel/__init__.py (ADR 0058): a new one reinstalls, so the metadata follows.
INSTALL_INPUTS := pyproject.toml constraints.txt services/brain-kernel/brain_kernel/__init__.py

# What `brain serve` needs, stamped apart from the test extras so `make serve` never installs them.
$(VENV)/.installed: $(INSTALL_INPUTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install -c constraints.txt -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .brain .pytest_cache
