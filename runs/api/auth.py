"""Who is calling: a browser session, or a script with ``Authorization: Token <key>``.

A token request carries no cookie, so it cannot be forged cross-site and
skips CSRF; a session request that changes something must pass Django's CSRF
check, done here because API views are ``csrf_exempt`` (token requests would
otherwise be refused before the view could tell them apart).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from functools import wraps

from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from runs.api.schemas import ApiError, body_too_large
from runs.models import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_token(user, name: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user`` and its key. Only the key's hash is stored:
    the key cannot be shown again."""
    key = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:8], key_hash=hash_key(key))
    return token, key


def api_view(*methods: str, public: bool = False) -> Callable:
    """Make a function an API view: JSON 405 for other methods, JSON 401 for
    callers who are not signed in (unless ``public``), CSRF for sessions, and
    ApiError raised anywhere inside answered as JSON, as are Django's refusals
    of a body or query string past its limits. A GET view answers HEAD too
    (RFC 9110): the same status and headers, no body."""
    allowed = (*methods, "HEAD") if "GET" in methods and "HEAD" not in methods else methods

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        # LoginRequiredMiddleware would redirect to the login page; an API
        # answers 401 itself.
        @login_not_required
        @csrf_exempt
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            try:
                if request.method not in allowed:
                    response = ApiError(405, f"method {request.method} not allowed").response()
                    response["Allow"] = ", ".join(allowed)
                    return response
                if not public:
                    authenticate(request)
                response = view(request, *args, **kwargs)
                if request.method == "HEAD":
                    # Servers may send a HEAD response's body as it is.
                    response["Content-Length"] = str(len(response.content))
                    response.content = b""
                return response
            # Django raises these where the body or query string is first read
            # (a view's parse_body, a session's CSRF check of a form), and
            # would answer with its HTML 400 page.
            except RequestDataTooBig:
                return body_too_large(request).response()
            except (TooManyFieldsSent, TooManyFilesSent) as exc:
                return ApiError(400, str(exc)).response()
            except ApiError as exc:
                response = exc.response()
                if exc.status == 401:
                    response["WWW-Authenticate"] = 'Token realm="api"'
                return response

        wrapped.api_methods = methods  # type: ignore[attr-defined]
        return wrapped

    return decorator


def authenticate(request: HttpRequest) -> None:
    """Set ``request.user`` from the token, or check the session (and its CSRF
    token on unsafe methods); raise ApiError(401/403) otherwise."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "token" or not key.strip():
            raise ApiError(401, "invalid token: send 'Authorization: Token <key>'")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key.strip())).first()
        if token is None or not token.user.is_active:
            raise ApiError(401, "invalid token")
        ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
        request.user = token.user
        return
    if not request.user.is_authenticated:
        raise ApiError(401, "authentication required")
    if request.method not in SAFE_METHODS:
        try:
            # The check reads a form body for its token: one that cannot be parsed is the client's error.
            reason = _CsrfCheck(lambda request: HttpResponse()).process_view(request, None, (), {})
        except MultiPartParserError as exc:
            raise ApiError(400, f"malformed multipart body: {exc}") from None
        if reason:
            raise ApiError(403, f"CSRF failed: {reason}")


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering the reason instead of a 403 page."""

    def _reject(self, request, reason):
        return reason
