"""``/favicon.ico``, which browsers ask for on their own (and a 404 there
fills the server's log): the SVG icon the pages link to, for anyone."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.views.decorators.http import require_safe


@login_not_required
@require_safe
def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("favicon.svg"))
