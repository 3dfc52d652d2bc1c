"""Browser-test plumbing: when a browser test fails, its report carries the
zenweb server's output and the page's console, not just the assertion."""

from __future__ import annotations

from collections.abc import Callable

import pytest

# (title, text producer) pairs a test's fixtures register for its failure report.
REPORT_SECTIONS = pytest.StashKey[list[tuple[str, Callable[[], str]]]]()


def add_report_section(item: pytest.Item, title: str, produce: Callable[[], str]) -> None:
    item.stash.setdefault(REPORT_SECTIONS, []).append((title, produce))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed:
        for title, produce in item.stash.get(REPORT_SECTIONS, []):
            try:
                text = produce()
            except Exception as exc:  # a report must never hide the failure
                text = f"(could not collect: {exc!r})"
            report.sections.append((title, text or "(empty)"))
    return report
