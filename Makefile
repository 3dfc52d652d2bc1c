# zenweb: `make run` starts it (embedded: SQLite, in-process worker, demo run);
# `make test` runs every test. Both set themselves up first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test setup lint services-test clean

$(VENV)/.installed: requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "zenweb needs $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

setup: $(VENV)/.installed
	$(PY) manage.py migrate --noinput -v0

run: setup
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: $(VENV)/.installed
	$(PY) -m ruff check .
	bash scripts/test.sh

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf $(VENV) var
