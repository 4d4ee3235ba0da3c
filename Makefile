# Two entry points: `make serve` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve test lint typecheck unit venv node engines clean

# The pinned, hashed lock is what CI and every clone install, so all test the same versions.
$(STAMP): pyproject.toml requirements-dev.lock
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# The Node SDK's compiler and types, from its lock file: installed here, never by a test.
NODE_STAMP := sdk/node/node_modules/.package-lock.json
$(NODE_STAMP): sdk/node/package-lock.json
	if command -v npm >/dev/null 2>&1; then cd sdk/node && npm ci --no-audit --no-fund; fi

node: $(NODE_STAMP)

# Prefect, whose server and runner the engine tests start, in an interpreter of its own (its
# pins do not fit the main lock; see requirements-prefect.in).
PREFECT_VENV := .venv-prefect
PREFECT_STAMP := $(PREFECT_VENV)/.installed
$(PREFECT_STAMP): requirements-prefect.lock
	test -d $(PREFECT_VENV) || $(PYTHON) -m venv $(PREFECT_VENV)
	$(PREFECT_VENV)/bin/pip install --quiet --upgrade pip
	$(PREFECT_VENV)/bin/pip install --quiet --require-hashes -r requirements-prefect.lock
	touch $(PREFECT_STAMP)

engines: $(PREFECT_STAMP)

serve: $(STAMP)
	$(BIN)/watchkeeper serve

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

typecheck: $(STAMP)
	$(BIN)/mypy

# The thorough API fuzz (marked slow) runs as its own step, before the rest of the suite; its
# quick form (`slow_has_it`), for a run of the fast tests alone, is left out of the rest.
# Each step names its slowest tests, so the suite's time can be watched from any CI log.
# Bytecode is written even where the environment says not to: without it every test module is
# rewritten and every `watchkeeper` process the tests start compiles its modules again.
test: lint typecheck node engines
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 2 --dist loadgroup -m slow --durations=20 $(PYTEST_ARGS)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n 2 --dist loadgroup -m "not slow and not slow_has_it" --durations=40 $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(PREFECT_VENV) .pytest_cache .mypy_cache .ruff_cache sdk/node/node_modules sdk/node/dist
