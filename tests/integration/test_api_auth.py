"""The JSON API's authentication over HTTP: API tokens for scripts, 401
without valid credentials, and CSRF checks for session posts only."""

from __future__ import annotations

import hashlib

import pytest
from django.test import Client

from runs.models import ApiToken
from tests.integration.api_client import post, token_for

pytestmark = pytest.mark.django_db


def test_it_authenticates_scripts_with_a_token(owner):
    key = token_for(owner, "ci")
    token = ApiToken.objects.get()
    assert (token.user, token.name, token.prefix, token.last_used) == (owner, "ci", key[:8], None)
    assert token.key_hash == hashlib.sha256(key.encode()).hexdigest()

    response = Client().get("/api/runs", headers={"Authorization": f"Token {key}"})

    assert response.status_code == 200
    assert response.json() == {"runs": [], "next": None}
    token.refresh_from_db()
    assert token.last_used is not None


def test_it_answers_401_without_valid_credentials(owner):
    token_for(owner)

    for headers in ({}, {"Authorization": "Token not-the-key"}, {"Authorization": "Bearer x"}):
        response = Client().get("/api/runs", headers=headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == 'Token realm="api"'
    assert Client().get("/api/runs").json() == {"error": "authentication required"}
    assert Client().get("/api/runs", headers={"Authorization": "Token nope"}).json() == {"error": "invalid token"}


def test_it_requires_a_csrf_token_for_session_posts_only(owner):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)

    refused = post(browser, "/api/commands", {"command": "echo for tides"})
    assert refused.status_code == 403
    assert refused.json()["error"].startswith("CSRF failed")
    assert browser.get("/api/runs").status_code == 200
    # With the cookie and its header, as the dashboard's JavaScript sends them, it passes.
    browser.cookies["csrftoken"] = "a" * 32
    passed = browser.post("/api/runs/999/cancel", headers={"X-CSRFToken": "a" * 32})
    assert passed.json() == {"error": "run 999 not found"}

    # The cookie-less token request needs none: it gets as far as the lookup.
    script = Client(enforce_csrf_checks=True, headers={"Authorization": f"Token {token_for(owner)}"})
    assert script.post("/api/runs/999/cancel").json() == {"error": "run 999 not found"}


def test_it_answers_a_session_post_with_an_unreadable_form_body_in_json(owner):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(owner)
    browser.cookies["csrftoken"] = "a" * 32  # the check gets as far as reading the form for its token

    refused = browser.post("/api/commands", b"x", content_type="multipart/form-data")

    assert refused.status_code == 400
    assert refused.json()["error"].startswith("malformed multipart body: ")
