"""The OpenAPI 3.1 document of the API, at /api/openapi.json.

Built from the pydantic models in schemas.py and the table of operations
below (one per route name in urls.py), so the bodies it describes are the
ones the views parse and send.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import get_resolver
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from runs.api import schemas as s
from runs.api.auth import api_view


@dataclass(frozen=True)
class Operation:
    route: str  # the route's name in urls.py
    method: str
    summary: str
    response: type[BaseModel] | None  # None: any JSON object
    status: int = 200
    # Other successful answers, with the same body: (status, when).
    also: tuple[tuple[int, str], ...] = ()
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    errors: tuple[int, ...] = (401,)
    markdown: bool = False  # also answers text/markdown (``?format=markdown``)
    public: bool = False


OPERATIONS = (
    Operation(
        "command-create",
        "post",
        "Answer a command: select a workflow and start a run",
        s.CommandOut,
        201,
        body=s.CommandRequest,
        query=s.FormatQuery,
        errors=(400, 401, 403, 413, 429),
        markdown=True,
    ),
    Operation(
        "command-detail",
        "get",
        "A command and its current COORDINATOR_RESULT",
        s.CommandOut,
        query=s.FormatQuery,
        errors=(400, 401, 404),
        markdown=True,
    ),
    Operation("run-list", "get", "Visible runs, newest first", s.RunPage, query=s.RunListQuery, errors=(400, 401)),
    Operation(
        "run-detail",
        "get",
        "A run with steps, claims, approvals, result and events",
        s.RunDetail,
        query=s.RunDetailQuery,
        errors=(400, 401, 404),
    ),
    Operation("run-cancel", "post", "Cancel a run", s.CancelOut, errors=(401, 403, 404, 409, 413)),
    Operation(
        "approval-list",
        "get",
        "Approvals by status (approvers only)",
        s.ApprovalList,
        query=s.ApprovalListQuery,
        errors=(400, 401, 403),
    ),
    Operation(
        "approval-decide",
        "post",
        "Approve or reject, with a reason (approvers only)",
        s.ApprovalOut,
        body=s.DecideRequest,
        errors=(400, 401, 403, 404, 409, 413),
    ),
    Operation(
        "workflow-register",
        "post",
        "Register workflow YAML as a new version (staff only)",
        s.WorkflowOut,
        201,
        also=((200, "The YAML equals the latest version, which is kept: nothing was created."),),
        body=s.WorkflowRequest,
        errors=(400, 401, 403, 413),
    ),
    Operation("openapi", "get", "This document", None, public=True, errors=()),
)

_ERRORS = {
    400: "The body or query string is invalid; `problems` names each field.",
    401: "No session and no valid `Authorization: Token <key>`.",
    403: "Not allowed, or a session request without its CSRF token.",
    404: "Not found, or not visible to the caller.",
    409: "Refused in the resource's current state; `error` says why.",
    # Any POST: Django reads no body past its limit, be it JSON for the view
    # or a session's form for the CSRF check.
    413: "The body is past the limit (DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB by default); `error` gives it.",
    429: (
        "The caller has as many runs under way as ZENWEB_MAX_ACTIVE_RUNS allows; `error` says so, "
        "and the Retry-After header how many seconds to wait."
    ),
}
_PARAMETER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")


@api_view("GET", public=True)
def schema_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(document())


@cache
def document() -> dict[str, Any]:
    # The routes as mounted (urls.py imports this module for schema_view).
    prefix, routes = get_resolver().namespace_dict["api"]
    patterns = {pattern.name: str(pattern.pattern) for pattern in routes.url_patterns}
    refs, schemas = _components()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        pattern = patterns[op.route]
        path = "/" + prefix + _PARAMETER.sub(r"{\g<name>}", pattern)
        paths.setdefault(path, {})[op.method] = _operation(op, pattern, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "zenweb API",
            "version": "1",
            "description": "Commands, runs, approvals and workflows of zenweb, as JSON.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                str(status): {"description": text, "content": _json({"$ref": refs[s.Error]})}
                for status, text in _ERRORS.items()
            },
            "securitySchemes": {
                "token": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "`Token <key>`; create a key with `manage.py create_api_token`.",
                },
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": settings.SESSION_COOKIE_NAME,
                    "description": "The dashboard's login; unsafe methods also need the CSRF token.",
                },
            },
        },
        "security": [{"token": []}, {"session": []}],
    }


def _operation(op: Operation, pattern: str, refs: dict[type[BaseModel], str]) -> dict[str, Any]:
    content = _json({"$ref": refs[op.response]} if op.response else {"type": "object"})
    if op.markdown:
        content["text/markdown"] = {"schema": {"type": "string"}}
    operation: dict[str, Any] = {
        "operationId": op.route.replace("-", "_"),
        "summary": op.summary,
        "parameters": _parameters(op, pattern),
        "responses": {str(op.status): {"description": op.summary, "content": content}},
    }
    for status, when in op.also:
        operation["responses"][str(status)] = {"description": when, "content": content}
    if op.body is not None:
        operation["requestBody"] = {"required": True, "content": _json({"$ref": refs[op.body]})}
    for status in op.errors:
        operation["responses"][str(status)] = {"$ref": f"#/components/responses/{status}"}
    if 400 in op.errors:
        invalid = [{"$ref": refs[s.InvalidRequest]}, {"$ref": refs[s.Error]}]
        if op.body is s.WorkflowRequest:
            invalid.append({"$ref": refs[s.InvalidWorkflow]})
        # anyOf, not oneOf: a body with `problems` is also a valid Error (any object with `error`).
        operation["responses"]["400"] = {"description": _ERRORS[400], "content": _json({"anyOf": invalid})}
    if op.public:
        operation["security"] = []
    return operation


def _parameters(op: Operation, pattern: str) -> list[dict[str, Any]]:
    parameters = [
        {
            "name": match["name"],
            "in": "path",
            "required": True,
            "schema": {"type": "integer"} if match["converter"] == "int" else {"type": "string"},
        }
        for match in _PARAMETER.finditer(pattern)
    ]
    if op.query is not None:
        properties = op.query.model_json_schema()["properties"]
        for name, field in op.query.model_fields.items():
            schema = properties[name]
            # An optional parameter is simply left out: describe the value, not null.
            values = [option for option in schema.pop("anyOf", []) if option != {"type": "null"}]
            if len(values) == 1:
                schema |= values[0]
            parameter = {"name": name, "in": "query", "required": field.is_required(), "schema": schema}
            if field.description:
                parameter["description"] = field.description
            parameters.append(parameter)
    return parameters


def _components() -> tuple[dict[type[BaseModel], str], dict[str, Any]]:
    """Every request and response model as a component schema, and its $ref."""
    requests = {op.body for op in OPERATIONS if op.body}
    responses = {op.response for op in OPERATIONS if op.response} | {s.Error, s.InvalidRequest, s.InvalidWorkflow}
    keyed = [(model, "validation") for model in requests] + [(model, "serialization") for model in responses]
    mapping, top = models_json_schema(
        sorted(keyed, key=lambda pair: pair[0].__name__), ref_template="#/components/schemas/{model}"
    )
    refs = {model: mapping[(model, mode)]["$ref"] for model, mode in keyed}
    return refs, top.get("$defs", {})


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}
