"""The request the dashboard's views get: Django's, with what django_htmx's
middleware sets on it (``request.htmx``: whether htmx sent it, and how)."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails  # set by django_htmx's middleware (zenweb/settings.py's MIDDLEWARE)
