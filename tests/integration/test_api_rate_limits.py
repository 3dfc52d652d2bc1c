"""Commands per minute per API token (ZENWEB_API_COMMANDS_PER_MINUTE): past
the limit a 429 with Retry-After, before any command is made; another token,
even the same person's, keeps its own count."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.api import rate_limits
from runs.models import Command
from tests.integration.api_client import post, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def still_clock(monkeypatch):
    """20 seconds into a minute, all test long."""
    monkeypatch.setattr(rate_limits, "clock", lambda: 60 * 29_000_000 + 20.0)


def test_it_refuses_a_token_past_its_commands_per_minute(owner, settings, django_capture_on_commit_callbacks):
    settings.ZENWEB_API_COMMANDS_PER_MINUTE = 2
    script = Client(headers={"Authorization": f"Token {token_for(owner, 'ci')}"})
    laptop = Client(headers={"Authorization": f"Token {token_for(owner, 'laptop')}"})

    with django_capture_on_commit_callbacks(execute=False):
        sent = [post(script, "/api/commands", {"command": f"tell me a joke {n}"}) for n in range(3)]
        other = post(laptop, "/api/commands", {"command": "tell me a joke"})

    assert [r.status_code for r in sent] == [201, 201, 429]
    refused = sent[-1]
    assert refused.json() == {
        "error": "too many commands: at most 2 a minute per token (ZENWEB_API_COMMANDS_PER_MINUTE)"
    }
    assert refused["Retry-After"] == "40"  # the rest of the minute
    assert other.status_code == 201
    assert Command.objects.filter(created_by=owner).count() == 3
    # Reading is not counted.
    assert script.get("/api/runs").status_code == 200


def test_a_session_has_a_count_of_its_own_and_zero_means_no_limit(owner, settings, django_capture_on_commit_callbacks):
    settings.ZENWEB_API_COMMANDS_PER_MINUTE = 1
    browser = Client()
    browser.force_login(owner)

    with django_capture_on_commit_callbacks(execute=False):
        first = post(browser, "/api/commands", {"command": "tell me a joke"})
        second = post(browser, "/api/commands", {"command": "tell me another"})
        settings.ZENWEB_API_COMMANDS_PER_MINUTE = 0
        unlimited = [post(browser, "/api/commands", {"command": f"joke {n}"}).status_code for n in range(3)]

    assert (first.status_code, second.status_code) == (201, 429)
    assert unlimited == [201, 201, 201]
