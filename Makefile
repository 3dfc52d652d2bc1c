# zenweb: `make run` starts it (embedded: SQLite, in-process worker, demo run);
# `make test` runs every test. Both set themselves up first.
# Python 3.11, 3.12 or 3.13: PYTHON if given, else the first of these that
# runs and is one of them (a pyenv shim on PATH may not run).
PYTHONS := python3.13 python3.12 python3.11 python3
IN_RANGE := -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))'
PYTHON ?= $(shell for p in $(PYTHONS); do $$p $(IN_RANGE) 2>/dev/null && { command -v $$p; break; }; done)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench setup lint sql-edge services clean

# The runtime from its lock (requirements/runtime.txt, every file's hash
# checked); the tools of the tests, lint, bench and `make services` on top
# from theirs (requirements/dev.txt). Both are compiled from pyproject.toml
# (DEVELOPERS.md, "Adding a dependency").
$(VENV)/.runtime: requirements/runtime.txt
	@test -x $(PY) || $(PYTHON) $(IN_RANGE) 2>/dev/null || { \
		if [ -z "$(PYTHON)" ]; then echo "zenweb needs Python 3.11, 3.12 or 3.13: none of $(PYTHONS) is one; install one, or set PYTHON=/path/to/python3.x"; \
		else echo "zenweb needs Python 3.11, 3.12 or 3.13: PYTHON=$(PYTHON) is $$($(PYTHON) -V 2>&1)"; fi; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) $(IN_RANGE) || { echo "$(VENV) has $$($(PY) -V 2>&1): zenweb needs 3.11, 3.12 or 3.13 (make clean, then again)"; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes -r requirements/runtime.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements/dev.txt
	$(PY) -m pip install --quiet --require-hashes -r requirements/dev.txt
	touch $@

setup: $(VENV)/.runtime
	$(PY) manage.py migrate --noinput -v0

run: setup
	@command -v bwrap >/dev/null || echo "bubblewrap is missing: run_shell is refused until you install it (apt-get install bubblewrap) or set ZENWEB_SANDBOX=off (docs/sandbox.md)"
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: $(VENV)/.dev sql-edge
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	bash scripts/test.sh

# Figures, not tests: prints a table against the targets and writes
# bench-results/bench-<timestamp>.json. Uses PostgreSQL and Redis on this
# machine when reachable (see docs/benchmarks.md).
bench: $(VENV)/.dev
	$(PY) -m bench

# The services way: DATABASE_URL and REDIS_URL must be set (README, docs/running.md).
# daphne on http://$(HOST):$(PORT) (127.0.0.1:8000), not honcho's default 5000.
services: $(VENV)/.dev
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" || { echo "set DATABASE_URL and REDIS_URL first"; exit 1; }
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_catalog
	HOST=$(HOST) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/honcho start --port $(PORT) web worker

# mypy checks agents/, runs/ and zenweb/ as pyproject.toml's [tool.mypy] says.
lint: $(VENV)/.dev sql-edge
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

# Raw SQL and the question of which database it is are asked only in
# runs/store/sql/, the store; whether a transaction is open, only in its
# dialect subclasses (postgres*.py, sqlite.py): no caller picks a code path
# by it (dialect differences stay at the edge: docs/architecture.md,
# "Layers"). The drivers' imports are import-linter's to check.
sql-edge:
	@if grep -rnE '\.vendor\b|\.execute(many)?\(' --include='*.py' runs zenweb agents | grep -v -e '^runs/store/sql/' -e '/migrations/'; then \
		echo 'raw SQL or a database vendor check outside runs/store/sql/ (above)'; exit 1; fi
	@if grep -rnE 'in_atomic_block|in_transaction\(' --include='*.py' runs zenweb agents | grep -vE '^runs/store/sql/(postgres[a-z_]*|sqlite)\.py:'; then \
		echo 'a transaction probe outside the dialect subclasses of the store (above)'; exit 1; fi

clean:
	rm -rf $(VENV) var
