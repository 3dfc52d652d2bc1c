"""Which database errors are the connection's, not the work's.

A lost or refused connection (a failover, a PgBouncer restart, an idle
reaper, SQLite's lock held too long) passes: the work is tried again
(runs/tasks.py retries the task, the journal waits for the database). A
statement that cannot run (a table or column that does not exist, a
syntax error) fails the same way every time: retried for a quarter of an
hour it would only hide the bug, so it fails the step or the run at once.

Django raises both as OperationalError on SQLite: the sqlite3 error it
wraps tells them apart (SQLITE_ERROR is the statement's; SQLITE_BUSY,
SQLITE_LOCKED, SQLITE_IOERR... are the database's). On PostgreSQL a
statement's errors are ProgrammingError, and OperationalError is the
connection's or the server's.
"""

from __future__ import annotations

import sqlite3

from django.db import InterfaceError, OperationalError

# SQLite's result code for an error in the statement itself.
_SQLITE_STATEMENT_ERROR = "SQLITE_ERROR"


def connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or used just
    now, so the same work may succeed when tried again."""
    if isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    return not (isinstance(cause, sqlite3.Error) and cause.sqlite_errorname == _SQLITE_STATEMENT_ERROR)


def first_line(exc: BaseException) -> str:
    """A database error in one line, for a log line that stands for it."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
