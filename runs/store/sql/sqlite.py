"""The store on SQLite: the general store (runs/store/sql/store.py), with
SQLite's JSON functions where a statement reads a step's dependencies, and
no statement for the run's lock."""

from __future__ import annotations

from runs.store.sql.store import Store


class SqliteStore(Store):
    name = "sqlite"
    depends_on = ("p.depends_on = '[]'", "EXISTS(SELECT 1 FROM json_each(p.depends_on) d WHERE d.value = s.step_id)")
    dependencies_of_s = "SELECT value FROM json_each(s.depends_on)"

    def lock_run(self, run_id: int) -> None:
        """Nothing to send: SQLite locks the whole database, not rows, and
        zenweb's transactions on it begin IMMEDIATE (zenweb/settings.py),
        taking that write lock at BEGIN: one writer at a time, in commit order."""
