"""The Content-Security-Policy every response carries.

The dashboard needs nothing inline: its scripts and styles are files under
/static/, htmx's conditions are checked in runs/static/js/live.js (no eval), its
indicator styles are off (base.html), and a chart's colours are SVG
attributes. So a script or style an agent's text smuggled into a page, or an
inline handler, does not run. Django 5.2 has no CSP of its own.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        # The page's empty favicon is a data: URL (base.html).
        "img-src 'self' data:",
        # 'self' covers the run page's websocket to the same host.
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    # MiddlewareMixin: async-capable, so daphne's requests stay on the event loop.
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
