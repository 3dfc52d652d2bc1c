"""The API's routes, under /api/: django-ninja's (the operations, the
document, the docs page), each answering HEAD where it answers GET and a
JSON 405 for other methods; then a JSON 404 for every other URL."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponseBase
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from runs.api.app import api
from runs.api.errors import ApiError


def endpoint(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """One of django-ninja's views, answering HEAD as GET without the body
    (RFC 9110: the same status and headers) and a wrong method in JSON."""

    # LoginRequiredMiddleware would redirect to the login page; the API
    # answers 401 itself (auth.py), and its document and docs page are public.
    @login_not_required
    @csrf_exempt
    def answer(request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        method = request.method
        if method == "HEAD":
            request.method = "GET"
        response = view(request, *args, **kwargs)
        if response.status_code == 405 and response.get("Content-Type", "").startswith("text/html"):
            return _not_allowed(method or "", response["Allow"])
        if method == "HEAD" and not response.streaming:
            # Servers may send a HEAD response's body as it is.
            response["Content-Length"] = str(len(response.content))  # type: ignore[attr-defined]
            response.content = b""  # type: ignore[attr-defined]
        return response

    return answer


def _not_allowed(method: str, allowed: str) -> HttpResponseBase:
    methods = [m.strip() for m in allowed.split(",")]
    if "GET" in methods and "HEAD" not in methods:
        methods.append("HEAD")
    response = ApiError(405, f"method {method} not allowed").response()
    response["Allow"] = ", ".join(methods)
    return response


@login_not_required
@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponseBase:
    """Any other URL under /api/, such as an id that is not a number: the
    JSON 404 the schema promises, not Django's HTML page."""
    return ApiError(404, f"no such API resource: {request.path}").response()


def _routes() -> list[URLPattern]:
    patterns, _, _ = api.urls
    routes = []
    for pattern in patterns:
        assert isinstance(pattern, URLPattern), pattern
        if pattern.name == "api-root":
            # Kept for its name (django-ninja finds the API's path by it); /api/ itself is a 404.
            routes.append(URLPattern(pattern.pattern, not_found, name=pattern.name))
        else:
            routes.append(URLPattern(pattern.pattern, endpoint(pattern.callback), pattern.default_args, pattern.name))
    return routes


app_name = "api"
urlpatterns = [
    *_routes(),
    # Last: every other /api/ URL answers a JSON 404 (not part of the document).
    re_path(r"^(?P<rest>.*)$", not_found, name="not-found"),
]
