"""Known secret values never leave a tool call: replaced in its outcome."""

from __future__ import annotations

import json

from agents.redaction import REDACTED, Redactor, secret_values


def test_it_collects_the_values_of_variables_named_like_secrets():
    environ = {
        "OPENAI_API_KEY": "sk-abcdefgh12345",
        "GITHUB_TOKEN": "ghp_0123456789",
        "DB_PASSWORD": "hunter2hunter2",
        "SHORT_SECRET": "abc",  # too short to redact without garbling output
        "HOME": "/home/zenweb",
    }

    found = secret_values(environ, ["django-insecure-signing-key"])

    assert set(found) == {"sk-abcdefgh12345", "ghp_0123456789", "hunter2hunter2", "django-insecure-signing-key"}


def test_it_replaces_secrets_in_text_and_data_json_escaped_too():
    quoted = 'pa"ss\\word-1234'
    redactor = Redactor(["sk-canary-0001", "sk-canary-0001-longer", quoted])

    assert redactor.text("a sk-canary-0001-longer b sk-canary-0001") == f"a {REDACTED} b {REDACTED}"
    assert redactor.text(json.dumps({"p": quoted})) == '{"p": "[redacted]"}'
    assert redactor.data({"rows": [["sk-canary-0001", 3]], "sk-canary-0001": True}) == {
        "rows": [[REDACTED, 3]],
        REDACTED: True,
    }
    assert not Redactor([]) and Redactor([]).text("sk-canary-0001") == "sk-canary-0001"
