"""Fuzz the JSON API from its own OpenAPI document: random path ids, query
parameters and bodies (well-formed JSON, wrong shapes, not JSON at all) for
every operation. Whatever arrives, the answer is JSON and never a 500."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.api.auth import create_token
from runs.models import Approval, Run
from tests.conftest import register

pytestmark = pytest.mark.django_db

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.text(max_size=30), st.floats(allow_nan=False)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=10,
)


@pytest.fixture
def api(staff):
    """A staff token holder who may decide approvals, a run and an approval to aim at."""
    staff.user_permissions.add(Permission.objects.get(codename="decide_approval"))
    run = Run.objects.create(
        workflow=register("approvals/wipe"), inputs={}, created_by=staff, status="awaiting_approval"
    )
    Approval.objects.create(run=run, kind="workflow", what="w", why="y", arguments={}, arguments_hash="0" * 64)
    _, key = create_token(staff)
    client = Client(HTTP_AUTHORIZATION=f"Token {key}")
    document = client.get("/api/openapi.json").json()
    return client, document, run


def operations(document):
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield path, method, operation


def body_fields(document, operation) -> list[str]:
    ref = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {}).get("$ref")
    if not ref:
        return []
    schema = document["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    return list(schema.get("properties", {}))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_it_never_answers_500_to_any_request_its_schema_describes(api, data):
    client, document, run = api
    path, method, operation = data.draw(st.sampled_from(list(operations(document))))
    ids = st.one_of(st.sampled_from([run.pk, run.approvals.get().pk]), st.integers(0, 10**12))
    url = re.sub(r"\{[^}]+\}", lambda _: str(data.draw(ids)), path)
    query_names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"]
    query = data.draw(
        st.dictionaries(
            st.sampled_from(query_names or ["x"]),
            st.one_of(st.text(max_size=8), st.integers(-5, 500).map(str)),
            max_size=3,
        )
    )
    fields = body_fields(document, operation)
    body = data.draw(
        st.one_of(
            st.dictionaries(st.sampled_from(fields or ["x"]), json_values, max_size=4).map(json.dumps),
            json_values.map(json.dumps),
            st.text(max_size=40),
        )
    )
    if method == "get":
        response = client.get(url, query)
    else:
        response = client.generic(
            method.upper(), f"{url}?{'&'.join(f'{k}=1' for k in query)}", body, "application/json"
        )

    assert response.status_code < 500, (method, url, query, body, response.content[:300])
    if response["Content-Type"].startswith("application/json"):
        json.loads(response.content)
    else:
        assert response["Content-Type"].startswith("text/markdown"), response["Content-Type"]
