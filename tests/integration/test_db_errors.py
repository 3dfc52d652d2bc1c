"""Which database errors runs/store/sql/errors.py counts as the connection's (the
task is retried) and which as the statement's (a bug: it fails at once)."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import InterfaceError, OperationalError, ProgrammingError

from runs.store.sql.errors import connection_lost


def _wrapped(cause: Exception) -> OperationalError:
    """``cause`` as Django raises it (django.db.utils.DatabaseErrorWrapper)."""
    error = OperationalError(*cause.args)
    error.__cause__ = cause
    return error


def _sqlite_error(statement: str, tmp_path) -> sqlite3.Error:
    db = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN IMMEDIATE")  # the write lock, held
    other = sqlite3.connect(db, timeout=0)
    try:
        other.execute(statement)
    except sqlite3.Error as exc:
        return exc
    finally:
        other.close()
        holder.close()
    raise AssertionError(f"{statement!r} ran")


def test_a_lost_or_locked_connection_is_tried_again(tmp_path):
    assert connection_lost(InterfaceError("connection already closed"))
    assert connection_lost(OperationalError("server closed the connection unexpectedly"))
    locked = _sqlite_error("INSERT INTO t VALUES (1)", tmp_path)
    assert locked.sqlite_errorname == "SQLITE_BUSY"
    assert connection_lost(_wrapped(locked))


@pytest.mark.parametrize("statement", ["SELECT nope FROM t", "SELECT a FROM no_such_table", "SELEC 1"])
def test_a_statement_that_cannot_run_is_not(tmp_path, statement):
    error = _sqlite_error(statement, tmp_path)
    assert not connection_lost(_wrapped(error))
    assert not connection_lost(ProgrammingError("column nope does not exist"))
