"""zenweb's benchmarks: `python -m bench` (or `make bench`).

Each measurement lives in its own module and returns ``Result`` rows
(bench/common.py); __main__ prints them as a table next to the issue's
targets and writes bench-results/bench-<timestamp>.json. Figures only:
nothing here asserts a timing, and none of it runs in the test suite.

common.py        result rows, targets, throwaway databases, child and worker processes
child.py         `python -m bench.child`: one measurement function in a configured process
router.py        routed messages per second: in memory, SQLite, PostgreSQL
dashboard.py     server time of the run page, event page and runs list
orchestration.py a 500-step fan-out on zenweb's workers vs bare Celery
bare_celery.py   the bare Celery app orchestration.py compares against
live.py          events per second and latency to websocket clients
"""
