"""Clients of the JSON API for the API tests: a token made the way an
operator makes one, a client that sends it, a JSON post, and the echo
workflow a command selects."""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command
from django.test import Client

# A fast workflow the scripted workflow handler selects for "echo ... for <subject>".
ECHO = """\
name: echo
description: Say the subject back.
triggers: [echo]
inputs:
  subject:
    type: string
    required: true
agents:
  echoer:
    description: echoer agent
    script:
      - say: "echo: $subject"
steps:
  - id: echo
    agent: echoer
"""


def token_for(user, name: str = "") -> str:
    """A key made the way an operator makes one, with the management command."""
    stdout, stderr = StringIO(), StringIO()
    call_command("create_api_token", user.username, "--name", name, stdout=stdout, stderr=stderr)
    assert "it is not shown again" in stderr.getvalue()
    return stdout.getvalue().strip()


def api(user) -> Client:
    """A client that sends the user's token on every request (and no cookie)."""
    return Client(headers={"Authorization": f"Token {token_for(user)}"})


def post(client: Client, url: str, body: object, **extra):
    return client.post(url, json.dumps(body), content_type="application/json", **extra)
