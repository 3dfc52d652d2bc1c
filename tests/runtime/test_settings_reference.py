"""docs/settings.md is the one reference of the environment zenweb reads: it
lists every ZENWEB_*, DJANGO_* and OPENAI_* variable the code reads (a name
in quotes in its Python, ${NAME} in its shell scripts), and none it no
longer reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "settings.md"
NAME = r"(?:ZENWEB|DJANGO|OPENAI)_[A-Z0-9_]*[A-Z0-9]"
IN_PYTHON = re.compile(rf"""["']({NAME})["']""")
IN_SHELL = re.compile(rf"\$\{{({NAME})")
IN_TABLE = re.compile(rf"`({NAME}|DATABASE_URL|REDIS_URL)`")


def read_by_the_code() -> dict[str, str]:
    """Each variable's name and the first file that reads it."""
    found: dict[str, str] = {}
    sources = [ROOT / "manage.py"]
    for package in ("agents", "runs", "zenweb", "bench"):
        sources += sorted((ROOT / package).rglob("*.py"))
    for path in sources:
        for name in IN_PYTHON.findall(path.read_text()):
            found.setdefault(name, str(path.relative_to(ROOT)))
    for path in sorted((ROOT / "scripts").glob("*.sh")):
        for name in IN_SHELL.findall(path.read_text()):
            found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def listed_on_the_page() -> set[str]:
    """The variables in the first column of the page's tables."""
    names: set[str] = set()
    for line in PAGE.read_text().splitlines():
        if line.startswith("| `"):
            first_column = line.split("|")[1]
            names.update(IN_TABLE.findall(first_column))
    return names


def test_the_page_lists_every_variable_the_code_reads():
    read = read_by_the_code()
    assert len(read) > 40, "the search finds the variables the code reads"
    missing = sorted(set(read) - listed_on_the_page())
    assert not missing, "docs/settings.md lacks: " + ", ".join(f"{name} (read in {read[name]})" for name in missing)


def test_the_page_lists_no_variable_the_code_no_longer_reads():
    stale = sorted(listed_on_the_page() - set(read_by_the_code()) - {"DATABASE_URL", "REDIS_URL"})
    assert not stale, "docs/settings.md lists variables no code reads: " + ", ".join(stale)
