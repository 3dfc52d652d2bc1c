"""A model's NUL characters: PostgreSQL's text and jsonb columns cannot hold
them, so there they are stored as U+FFFD; SQLite keeps them. Either way the
run completes and loses nothing else.

The same test runs in both passes of `make test`: on SQLite, and (marked
services) on PostgreSQL."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from runs.actions import do_create_run
from runs.models import Run
from tests.conftest import assert_gapless, register, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.sandbox
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def test_it_stores_what_a_model_says_with_nul_characters(backend, celery_worker, openai_endpoint):
    if connection.vendor != backend:
        pytest.fail(f"this pass runs on {connection.vendor}, not {backend}: see scripts/test.sh")
    nul = "\ufffd" if backend == "postgresql" else "\0"
    openai_endpoint.push_tool_calls(
        [
            ("call_1", "send_message", json.dumps({"text": "before\0after"})),
            ("call_2", "write_file", json.dumps({"path": "nul.txt", "content": "left\0right"})),
        ]
    )
    openai_endpoint.push_tool_calls([("call_3", "run_shell", json.dumps({"command": "printf 'a\\000b'"}))])
    openai_endpoint.push_text("done\0 with NUL")

    run = wait_for_run(do_create_run(register("openai_nul"), {}), timeout=60)

    assert run.status == Run.Status.COMPLETED, run.error
    assert run.steps.get(step_id="binary").output == f"done{nul} with NUL"
    assert run.messages.get(sender="binary").content == f"before{nul}after"
    # The arguments are kept as the JSON text the model sent: NUL is an escape there.
    assert json.loads(run.tool_calls.get(name="write_file").arguments)["content"] == "left\0right"
    # So is a typed result: NUL survives as an escape in its JSON text.
    assert json.loads(run.tool_calls.get(name="run_shell").result)["result"]["output"] == "a\0b"
    assert run.events.get(type="coordinator_narration").data["text"] == f"binary says: before{nul}after"
    assert_gapless(run)
