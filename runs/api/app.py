"""The API: django-ninja with the operations of views.py, token or session
auth (auth.py), every refusal as JSON (errors.py), its OpenAPI document at
/api/openapi.json and Swagger UI at /api/docs (served from this server's
static files, not a CDN: ``ninja`` is in INSTALLED_APPS)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

import pydantic_core
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from ninja import NinjaAPI
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation
from ninja.renderers import JSONRenderer

from runs.api import errors, questions, views
from runs.api.auth import callers

# The security schemes' names in the document (django-ninja names them after the classes).
SCHEMES = {"TokenAuth": "token", "SessionAuth": "session"}


class Renderer(JSONRenderer):
    """JSON as pydantic writes it: timestamps to the microsecond, as stored
    (django-ninja's own renderer cuts them to the millisecond)."""

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> bytes:
        return pydantic_core.to_json(data)


def get_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The document and the docs page answer GET (and so HEAD) only, as
    django-ninja's operations do (a 405 its routes turn into JSON)."""

    @wraps(view)
    def answer(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        return view(request, *args, **kwargs)

    return answer


class Api(NinjaAPI):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # The document, by the path the API is mounted at: it changes only
        # with the code, and takes django-ninja a quarter of a second to make.
        self.documents: dict[str, OpenAPISchema] = {}

    def get_content_type(self) -> str:
        # No charset parameter: JSON is UTF-8.
        return "application/json"

    def get_openapi_operation_id(self, operation: Operation) -> str:
        return operation.view_func.__name__

    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: Any = None) -> OpenAPISchema:
        """django-ninja's document, with what it cannot say itself: the
        security schemes' names, what each refusal means, optional query
        parameters as the values they take, and the document's own path."""
        root = path_prefix if path_prefix is not None else self.get_root_path(path_params or {})
        if root not in self.documents:
            document = super().get_openapi_schema(path_prefix=root)
            schemes = document["components"].get("securitySchemes", {})
            document["components"]["securitySchemes"] = {SCHEMES[name]: scheme for name, scheme in schemes.items()}
            for item in document["paths"].values():
                for operation in item.values():
                    _amend(operation)
            document["paths"][f"{root}openapi.json"] = {"get": OWN_PATH}
            self.documents[root] = document
        return self.documents[root]


OWN_PATH = {
    "operationId": "openapi",
    "summary": "This document",
    "parameters": [],
    "responses": {
        200: {"description": "This document", "content": {"application/json": {"schema": {"type": "object"}}}}
    },
    "security": [],
}


def _amend(operation: dict[str, Any]) -> None:
    # A public operation (the handler shapes' schemas) has none: an empty list says so.
    security = operation.get("security", [])
    operation["security"] = [{SCHEMES[name]: scopes} for each in security for name, scopes in each.items()]
    for status, response in operation["responses"].items():
        if status in errors.MEANINGS:
            response["description"] = errors.MEANINGS[status]
    for parameter in operation["parameters"]:
        # An optional parameter is left out, never sent as null: describe the value.
        schema = parameter["schema"]
        values = [option for option in schema.get("anyOf", []) if option != {"type": "null"}]
        if len(values) == 1 and not parameter["required"]:
            del schema["anyOf"]
            schema |= values[0]


api = Api(
    title="zenweb API",
    version="1",
    description="Commands, runs, approvals and workflows of zenweb, as JSON.",
    urls_namespace="api",
    docs_decorator=get_only,
    auth=callers(),
    renderer=Renderer(),
    parser=errors.JsonParser(),
)
errors.install(api)
api.add_router("", views.router)
api.add_router("", questions.router)
