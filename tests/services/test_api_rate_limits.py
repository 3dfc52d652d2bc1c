"""Commands per minute per API token across web processes: two daphnes on
one PostgreSQL and one Redis share the token's count (the rate_limits cache
is Redis), and with Redis away the count is skipped, not the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.services import conftest as services

pytestmark = pytest.mark.services

MAKE_TOKEN = """
from django.contrib.auth.models import User
from runs.api.auth import create_token
print(create_token(User.objects.create_user("script"))[1])
"""


def command(base: str, key: str, text: str) -> tuple[int, str | None, dict]:
    request = urllib.request.Request(
        f"{base}/api/commands",
        json.dumps({"command": text}).encode(),
        {"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Retry-After"), json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("Retry-After"), json.loads(refused.read())


def test_two_web_processes_share_a_tokens_count(own_postgres, own_redis, tmp_path):
    env = {"DATABASE_URL": own_postgres.url, "REDIS_URL": own_redis.url, "ZENWEB_API_COMMANDS_PER_MINUTE": "2"}
    made = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", MAKE_TOKEN],
        cwd=services.ROOT,
        env={**os.environ, **env},
        capture_output=True,
        check=True,
    )
    key = made.stdout.decode().split()[-1]
    with (
        services.daphne(tmp_path / "a.log", **env) as first,
        services.daphne(tmp_path / "b.log", **env) as second,
    ):
        # The count is per calendar minute: not the last seconds of one.
        if time.time() % 60 > 50:
            time.sleep(61 - time.time() % 60)
        answers = [command(base, key, f"tell me a joke {n}") for n, base in enumerate([first, second, first])]
        assert [status for status, _, _ in answers] == [201, 201, 429], answers
        assert 1 <= int(answers[-1][1]) <= 60
        assert answers[-1][2]["error"].startswith("too many commands: at most 2 a minute per token")

        own_redis.stop()
        try:
            # Nothing counts the commands now; ZENWEB_MAX_ACTIVE_RUNS still holds.
            assert command(second, key, "tell me another")[0] == 201
        finally:
            own_redis.start()
