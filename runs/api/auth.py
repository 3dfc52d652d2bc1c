"""Who is calling: a script with ``Authorization: Token <key>``, or a browser
session, as django-ninja's security classes (tried in that order).

A token request carries no cookie, so it cannot be forged cross-site and
skips CSRF; a session request that changes something must pass Django's CSRF
check, done here because django-ninja's views are ``csrf_exempt`` (token
requests would otherwise be refused before the view could tell them apart).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from ninja.security import APIKeyCookie, APIKeyHeader
from ninja.security.apikey import APIKeyBase

from runs.api.errors import ApiError
from runs.models import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh API key: ``zw_`` and 43 URL-safe characters. The fixed
    start names what the key is (secret scanners and people can tell it
    apart) and keeps its prefix from starting with ``-``, which a command
    line would read as an option (``api_tokens revoke PREFIX``)."""
    return "zw_" + secrets.token_urlsafe(32)


def create_token(user, name: str = "") -> tuple[ApiToken, str]:
    """A new token for ``user`` and its key. Only the key's hash is stored:
    the key cannot be shown again."""
    key = new_key()
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:8], key_hash=hash_key(key))
    return token, key


@dataclass(frozen=True)
class Requirement:
    """What an operation asks of its caller beyond being known (an
    approver, staff): checked once the caller is, before the request is
    read, so a caller without it gets its 403 whatever they sent."""

    allows: Callable[[Any], bool]
    refusal: str


def callers(requirement: Requirement | None = None) -> list[APIKeyBase]:
    """The ways in, in the order tried: a token, then the session."""
    return [TokenAuth(requirement), SessionAuth(requirement)]


def _require(requirement: Requirement | None, user: Any) -> None:
    if requirement is not None and not requirement.allows(user):
        raise ApiError(403, requirement.refusal)


class TokenAuth(APIKeyHeader):
    """``Authorization: Token <key>``: the token (``request.auth``), its user
    ``request.user``. No header: not this way (the session is tried next);
    a header that names no active user's token: 401."""

    param_name = "Authorization"
    openapi_description = "`Token <key>`; create a key with `manage.py api_tokens create`."

    def __init__(self, requirement: Requirement | None = None) -> None:
        self.requirement = requirement
        super().__init__()

    def authenticate(self, request: HttpRequest, key: str | None) -> ApiToken | None:
        if not key:
            return None
        scheme, _, secret = key.partition(" ")
        if scheme.lower() != "token" or not secret.strip():
            raise ApiError(401, "invalid token: send 'Authorization: Token <key>'")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(secret.strip())).first()
        if token is None or not token.user.is_active:
            raise ApiError(401, "invalid token")
        ApiToken.objects.filter(pk=token.pk).update(last_used=timezone.now())
        request.user = token.user
        _require(self.requirement, token.user)
        return token


class SessionAuth(APIKeyCookie):
    """The dashboard's login; an unsafe method also needs its CSRF token
    (403 naming the reason without it)."""

    param_name = settings.SESSION_COOKIE_NAME
    openapi_description = "The dashboard's login; unsafe methods also need the CSRF token."

    def __init__(self, requirement: Requirement | None = None) -> None:
        self.requirement = requirement
        # csrf: /api/docs sends the page's CSRF token with what it tries out.
        super().__init__(csrf=True)

    def _get_key(self, request: HttpRequest) -> str | None:
        # The CSRF check is authenticate's, so that a refusal says why.
        return request.COOKIES.get(self.param_name)

    def authenticate(self, request: HttpRequest, key: str | None) -> object | None:
        if not request.user.is_authenticated:
            return None
        if request.method not in SAFE_METHODS:
            try:
                # The check reads a form body for its token: one that cannot be parsed is the client's error.
                reason = _CsrfCheck(_no_view).process_view(request, _no_view, (), {})
            except MultiPartParserError as exc:
                raise ApiError(400, f"malformed multipart body: {exc}") from None
            if reason:
                raise ApiError(403, f"CSRF failed: {reason}")
        _require(self.requirement, request.user)
        return request.user


def _no_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering the reason instead of a 403 page."""

    def _reject(self, request, reason):
        return reason
