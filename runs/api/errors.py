"""Every refusal the API answers, as JSON ``{"error": ...}``: raised as
ApiError by a view, or by django-ninja and Django where a request is read
(bad JSON, a field that fails its schema, no credentials, a body or query
string past Django's limits), turned into the same body by the handlers
``install`` gives the API."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser

# What each refusal means, in the OpenAPI document's responses.
MEANINGS = {
    400: "The body or query string is invalid; `problems` names each field.",
    401: "No session and no valid `Authorization: Token <key>`.",
    403: "Not allowed, or a session request without its CSRF token.",
    404: "Not found, or not visible to the caller.",
    409: "Refused in the resource's current state; `error` says why.",
    # Any POST: Django reads no body past its limit, be it JSON for the view
    # or a session's form for the CSRF check.
    413: "The body is past the limit (DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB by default); `error` gives it.",
    429: (
        "Too many commands: the caller's token (or session) sent ZENWEB_API_COMMANDS_PER_MINUTE this "
        "minute, or the caller has as many runs under way as ZENWEB_MAX_ACTIVE_RUNS allows; `error` says "
        "which, and the Retry-After header how many seconds to wait."
    ),
}


class ApiError(Exception):
    """Stops a request with a JSON error answer."""

    def __init__(
        self, status: int, error: str, problems: list[dict[str, Any]] | None = None, *, retry_after: int | None = None
    ) -> None:
        super().__init__(error)
        self.status = status
        self.body: dict[str, Any] = {"error": error}
        if problems is not None:
            self.body["problems"] = problems
        self.retry_after = retry_after

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body, status=self.status)
        if self.retry_after is not None:
            response["Retry-After"] = str(self.retry_after)
        if self.status == 401:
            response["WWW-Authenticate"] = 'Token realm="api"'
        return response


class JsonParser(Parser):
    """django-ninja's JSON parser with the reason a body is not JSON."""

    def parse_body(self, request: HttpRequest) -> Any:
        try:
            return json.loads(request.body)
        except (ValueError, UnicodeDecodeError) as exc:
            sent = request.content_type
            if sent and sent != "application/json" and not sent.endswith("+json"):
                raise ApiError(400, f"invalid JSON: the body is {sent}, send application/json") from None
            raise ApiError(400, f"invalid JSON: {exc}") from None
        except RecursionError:
            raise ApiError(400, "invalid JSON: nested too deeply") from None


def install(api: NinjaAPI) -> None:
    """Answer every refusal the API meets as ApiError's JSON."""
    # Django raises the last three where the body or query string is first
    # read (a body parameter, a session's CSRF check of a form), and would
    # answer with its HTML 400 page.
    for kind in (ApiError, ValidationError, HttpError, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent):
        api.add_exception_handler(kind, _answer)


def _answer(request: HttpRequest, exc: object) -> HttpResponse:
    return refusal(request, exc).response()


def refusal(request: HttpRequest, exc: object) -> ApiError:
    """The ApiError that answers ``exc``, one of those ``install`` handles."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ValidationError):
        return ApiError(400, "invalid request", problems(exc.errors))
    # A body the parser refused comes wrapped ("Cannot parse request body").
    if isinstance(exc, HttpError) and isinstance(exc.__cause__, ApiError):
        return exc.__cause__
    if isinstance(exc, AuthenticationError):
        return ApiError(401, "authentication required")
    if isinstance(exc, HttpError):
        return ApiError(exc.status_code, exc.message)
    if isinstance(exc, RequestDataTooBig):
        return body_too_large(request)
    return ApiError(400, str(exc))


def body_too_large(request: HttpRequest) -> ApiError:
    """The 413 for a body past DATA_UPLOAD_MAX_MEMORY_SIZE, which Django refuses to read."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    length = request.META.get("CONTENT_LENGTH")
    size = f" ({length} bytes)" if length else ""
    return ApiError(413, f"request body too large{size}: the limit is {limit} bytes ({limit / 2**20:g} MB)")


def problems(errors: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each error with the dotted field it concerns (`body` for the whole
    body): django-ninja's location less where it was sent and the
    parameter's own name (``("body", "payload", "mode")`` is ``mode``)."""
    found = []
    for error in errors:
        source, *rest = error["loc"]
        field = rest[1:] if source == "body" else rest
        found.append({"field": ".".join(str(part) for part in field) or "body", "message": error["msg"]})
    return found
