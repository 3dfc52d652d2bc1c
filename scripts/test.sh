#!/usr/bin/env bash
# The whole suite, in two passes that run side by side:
#  1. everything that runs on the embedded default (SQLite, memory broker,
#     in-memory channel layer, headless chromium for browser tests), whose
#     output you watch;
#  2. the services tests, against PostgreSQL and Redis on this machine,
#     whose output is kept in test-output/services.log and shown after.
# The two share nothing (pass 1 never opens PostgreSQL or Redis; each test
# server gets a free port), and most of either pass waits on processes it
# started, so together they take about as long as the longer one alone.
# ZENWEB_TEST_PASSES=serial runs them one after the other.
# With CI=true nothing may be skipped: missing services fail the run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PG_URL=${ZENWEB_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/zenweb}
REDIS=${ZENWEB_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}
LOG=test-output/services.log

# The reference MCP servers from npm (tests/mcp/package.json); quick when installed.
bash scripts/install_mcp_servers.sh || exit 1
# Settings made once, before two processes would race to make them (the
# embedded default's secret key in var/).
DJANGO_SETTINGS_MODULE=zenweb.settings "$PY" -c 'import django; django.setup()' || exit 1

reachable() {
  "$PY" - "$PG_URL" "$REDIS" <<'PYCODE'
import sys
import psycopg, redis
try:
    psycopg.connect(sys.argv[1].rsplit("/", 1)[0] + "/postgres", connect_timeout=3).close()
    redis.Redis.from_url(sys.argv[2], socket_connect_timeout=3).ping()
except Exception as exc:
    print(f"services not reachable: {exc}")
    sys.exit(1)
PYCODE
}

services_pass() {
  DATABASE_URL=$PG_URL REDIS_URL=$REDIS "$PY" -m pytest -m services "$@"
}

services=""
if reachable || [ "${CI:-}" = "true" ]; then
  services=yes
else
  echo "skipped the PostgreSQL/Redis tests: services not reachable (CI=true makes this an error)"
fi

second=0
pid=""
if [ -n "$services" ] && [ "${ZENWEB_TEST_PASSES:-}" != "serial" ]; then
  mkdir -p test-output
  echo "the services tests run alongside; their output follows this pass's ($LOG)"
  services_pass "$@" >"$LOG" 2>&1 &
  pid=$!
  trap 'kill "$pid" 2>/dev/null' EXIT INT TERM
fi

env -u DATABASE_URL -u REDIS_URL "$PY" -m pytest -m "not services" "$@"
first=$?

if [ -n "$pid" ]; then
  wait "$pid"
  second=$?
  trap - EXIT INT TERM
  echo
  echo "==================== the services tests (PostgreSQL + Redis): $LOG ===================="
  cat "$LOG"
elif [ -n "$services" ]; then
  services_pass "$@"
  second=$?
fi
[ "$first" -eq 0 ] && [ "$second" -eq 0 ]
