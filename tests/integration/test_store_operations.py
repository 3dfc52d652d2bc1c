"""docs/architecture.md's table of the store's operations is the store as it
is: every public method of ``Store`` listed once, under the module that
defines it, and each dialect subclass's own methods (what it sends its own
way) named in its column, no more and no fewer."""

from __future__ import annotations

import re
from pathlib import Path

from runs.store.sql.postgres import PostgresStore
from runs.store.sql.sqlite import SqliteStore
from runs.store.sql.store import Store

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"


def _rows() -> list[list[str]]:
    """The cells of the operations table's rows, header and rule left out."""
    text = DOC.read_text()
    table = text[text.index("| operations | what they do |") :].split("\n\n", 1)[0]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([a-z_]+)`", cell)


def _module(cell: str) -> str:
    found = re.findall(r"\(`([a-z_]+)\.py`\)", cell)
    assert len(found) == 1, f"a row names the one module its operations are in: {cell}"
    return found[0]


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


def _own(subclass: type, modules: str) -> set[str]:
    """The public methods ``subclass`` defines in its dialect's own modules."""
    return {
        name
        for klass in subclass.__mro__
        if re.fullmatch(rf"runs\.store\.sql\.({modules})", klass.__module__)
        for name, value in vars(klass).items()
        if not name.startswith("_") and callable(value)
    }


def test_it_lists_every_operation_of_the_store_once_under_its_module():
    listed: list[str] = []
    for cells in _rows():
        module = _module(cells[0])
        for name in _names(cells[0]):
            where = next(klass for klass in Store.__mro__ if name in vars(klass))
            assert where.__module__ == f"runs.store.sql.{module}", f"{name} is in {where.__module__}, not {module}.py"
            listed.append(name)

    assert sorted(listed) == sorted(set(listed)), "an operation listed twice"
    assert set(listed) == _public(Store)


def test_it_names_what_each_dialect_sends_its_own_way():
    postgres = {name for cells in _rows() for name in _names(cells[2])}
    sqlite = {name for cells in _rows() for name in _names(cells[3])}

    assert postgres == _own(PostgresStore, r"postgres[a-z_]*")
    assert sqlite == _own(SqliteStore, "sqlite")
    # Each one is a method of the subclass: an override, or (PostgreSQL's
    # outside_transaction, start_and_claim_statement) a helper of its own.
    assert postgres - _public(Store) == {"outside_transaction", "start_and_claim_statement"}
