"""Browser-test plumbing: the shared fixtures (chromium, a zenweb server per
module, fresh pages) live in harness.py; when a browser test fails, its
report carries the zenweb server's output and the page's console."""

from __future__ import annotations

import pytest

from tests.browser.harness import REPORT_SECTIONS, browser, migrated_data_dir, open_page, server  # noqa: F401 - fixtures


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
