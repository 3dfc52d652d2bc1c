"""The favicon: linked from every page, and at /favicon.ico for anyone (no login, no 404)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_favicon_ico_answers_anyone_with_the_icon(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"


def test_every_page_links_the_icon(client):
    html = client.get("/login/").content.decode()

    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in html
