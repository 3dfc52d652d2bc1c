# zenweb: `make run` starts it (embedded: SQLite, in-process worker, demo run);
# `make test` runs every test. Both set themselves up first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test bench setup lint sql-edge services clean

$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || \
		{ echo "zenweb needs Python 3.11 (found: $(PYTHON)); set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

setup: $(VENV)/.installed
	$(PY) manage.py migrate --noinput -v0

run: setup
	@command -v bwrap >/dev/null || echo "bubblewrap is missing: run_shell is refused until you install it (apt-get install bubblewrap) or set ZENWEB_SANDBOX=off (docs/sandbox.md)"
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: $(VENV)/.installed sql-edge
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	bash scripts/test.sh

# Figures, not tests: prints a table against the targets and writes
# bench-results/bench-<timestamp>.json. Uses PostgreSQL and Redis on this
# machine when reachable (see docs/benchmarks.md).
bench: $(VENV)/.installed
	$(PY) -m bench

# The services way: DATABASE_URL and REDIS_URL must be set (README, docs/running.md).
services: $(VENV)/.installed
	@test -n "$$DATABASE_URL" -a -n "$$REDIS_URL" || { echo "set DATABASE_URL and REDIS_URL first"; exit 1; }
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_catalog
	$(VENV)/bin/honcho start

lint: $(VENV)/.installed sql-edge
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

# Raw SQL and the question of which database run only in runs/store/sql/
# (STYLE.md rule 15); the drivers' imports are import-linter's to check.
sql-edge:
	@if grep -rnE '\.vendor\b|\.execute(many)?\(' --include='*.py' runs zenweb agents | grep -v -e '^runs/store/sql/' -e '/migrations/'; then \
		echo 'raw SQL or a database vendor check outside runs/store/sql/ (above)'; exit 1; fi

clean:
	rm -rf $(VENV) var
