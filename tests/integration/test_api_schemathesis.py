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
