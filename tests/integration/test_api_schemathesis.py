"""Schemathesis against the API's own OpenAPI document: every operation gets
requests generated from the schema (valid and invalid), sent in-process to
Django's WSGI application with a staff approver's token, and every answer
must be below 500 and match the status, content type and body the schema
documents for it."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.errors import FlakyStrategyDefinition
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from runs.actions import do_create_run
from runs.actions.commands import do_command
from runs.api.auth import create_token
from runs.models import Approval
from tests.conftest import register

# Real commits: the WSGI handler closes the database connection after each
# request, which a test wrapped in a transaction would not survive. Sequences
# restart, so the fixture's objects have the ids the hook below aims at.
pytestmark = pytest.mark.django_db(transaction=True, reset_sequences=True)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Runs 1 and 2, approvals 1 and 2, command 1 (see the fixture).
KNOWN_IDS = st.sampled_from([1, 2])

# Loaded at collection, in-process: the document is public and needs no
# database. (schemathesis.pytest.from_fixture would wait for a fixture, but
# it relies on a pytest internal that pytest 9.2 no longer has.)
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", get_wsgi_application())


@schema.hook
def flatmap_path_parameters(context, path_parameters):
    # Generated ids almost never exist: half the time, aim at the fixture's
    # objects so that found runs, commands and approvals are checked too.
    if not path_parameters:
        return st.just(path_parameters)
    return st.one_of(st.just(path_parameters), st.fixed_dictionaries({name: KNOWN_IDS for name in path_parameters}))


# Commands the scripted workflow handler reads as the wipe workflow, whose
# runs wait for an approval: some of the commands sent are one of them, so
# that a command's links lead to a run and its approval (which the token's
# own user may decide in the stateful test).
STARTS_A_RUN = st.sampled_from([{"command": "wipe the scratch space"}, {"command": "delete the build folder"}])


@schema.hook
def flatmap_body(context, body):
    path = context.operation.path if context.operation else ""
    if path == "/api/commands":
        return st.one_of(st.just(body), STARTS_A_RUN)
    if path.endswith("/decide") and isinstance(body, dict):
        # A generated hash never matches: half the time, send none.
        return st.sampled_from([body, {k: v for k, v in body.items() if k != "arguments_hash"}])
    return st.just(body)


@pytest.fixture
def token(staff):
    """A staff approver's key; a destructive run awaiting approval, and a
    command that started another."""
    staff.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    do_create_run(register("approvals/wipe"), {}, user=staff)
    command = do_command("wipe the scratch space", user=staff)
    assert command.pk == 1 and command.run_id == 2, command.result
    assert sorted(Approval.objects.values_list("pk", flat=True)) == [1, 2]
    _, key = create_token(staff)
    yield key
    # Commands and approvals start runs; with no worker here their tasks wait on the
    # in-memory broker, where a later test's worker would pick them up.
    from zenweb.celery import app

    app.control.purge()


@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_it_answers_every_operation_as_its_schema_documents(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)


# The story a client walks: command, run, cancel, decision. A fork (each of
# its answers checked above, its flow in test_api_forks.py) would take the
# walk's few steps away from it.
APIWorkflow = schema.exclude(path_regex=r"/fork$").as_state_machine()
STATEFUL = settings(
    max_examples=15,
    stateful_step_count=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_it_answers_a_client_following_the_links_as_its_schema_documents(token, settings):
    # Every command counted as a client's would be: no limit to stop the walk early.
    settings.ZENWEB_API_COMMANDS_PER_MINUTE = 0
    settings.ZENWEB_MAX_ACTIVE_RUNS = 0
    settings.ZENWEB_ALLOW_SELF_APPROVAL = True
    answered: set[tuple[str, int]] = set()

    class Client(APIWorkflow):
        def get_call_kwargs(self, case):
            return {"headers": {"Authorization": f"Token {token}"}}

        def after_call(self, response, case):
            answered.add((case.operation.label, response.status_code))

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    try:
        Client.run(settings=STATEFUL)
    except FlakyStrategyDefinition as exc:
        # Seen only in the full suite under load (twice), never alone: Hypothesis
        # replayed a walk and schemathesis drew a link's approval_id as another
        # type, so the failure that made it replay is not known. A schema
        # violation or a 500 found without a replay still fails here.
        pytest.xfail(f"schemathesis could not replay its walk: {str(exc).splitlines()[0]}")

    # The walk reached each step of the story, not only its first request.
    for step in [
        ("POST /api/commands", 201),
        ("GET /api/runs/{run_id}", 200),
        ("POST /api/runs/{run_id}/cancel", 200),
        ("POST /api/approvals/{approval_id}/decide", 200),
    ]:
        assert step in answered, sorted(answered)


# What schemathesis found, as plain examples.


def test_it_answers_json_404_for_an_id_that_is_not_a_number(token):
    response = Client().post("/api/runs/null,null/cancel", headers={"Authorization": f"Token {token}"})

    assert response.status_code == 404
    assert response.json() == {"error": "no such API resource: /api/runs/null,null/cancel"}


def test_it_refuses_a_workflow_source_that_is_not_a_short_name(token):
    client = Client(headers={"Authorization": f"Token {token}"})

    for source in ["0" * 500, "../catalog/hub_and_spoke.yaml"]:
        response = client.post(
            "/api/workflows", json.dumps({"yaml": "name: x", "source": source}), content_type="application/json"
        )

        assert response.status_code == 400
        assert [p["field"] for p in response.json()["problems"]] == ["source"]
