"""Files zenweb keeps for itself (the SQLite database, the secret key, the
admin password) are readable by its own user only: anyone else on the
machine could otherwise read sessions, API token hashes or the signing key."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def private_dir(path: Path) -> Path:
    """Create ``path`` (and its parents) and make it 0700, an existing one too."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)
    except OSError as exc:
        raise ImproperlyConfigured(f"data directory {path} (ZENWEB_DATA_DIR): cannot make it 0700: {exc}") from None
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty if missing; either way make it 0600. SQLite gives
    its -wal and -shm files the database file's mode."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, which is 0600 from the moment it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    path.chmod(0o600)


def keep_first(path: Path, text: str) -> str:
    """Give ``path`` the content ``text`` unless it has one; return what it
    holds. The file appears whole or not at all (written aside, then linked
    into place, which fails if another process's came first), so processes
    that start together agree on one value and never read a half-written file."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    write_private(aside, text)
    try:
        os.link(aside, path)
    except FileExistsError:
        pass
    finally:
        aside.unlink()
    return path.read_text()
