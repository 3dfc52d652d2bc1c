"""Every page carries a Content-Security-Policy that allows no inline script,
inline style or eval (tests/browser/test_content_security_policy.py shows the
dashboard works under it)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_it_sends_a_policy_without_inline_script_style_or_eval(client, owner):
    login_page = client.get("/login/")
    client.force_login(owner)
    runs_page = client.get("/")

    for response in (login_page, runs_page):
        policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
        assert policy["script-src"] == "'self'"
        assert policy["style-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"
        assert "unsafe" not in response["Content-Security-Policy"]
    html = runs_page.content.decode()
    assert '"includeIndicatorStyles": false' in html
    assert "<script>" not in html and " style=" not in html
