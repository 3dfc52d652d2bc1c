"""Request bodies go to Django unparsed by Twisted.

Twisted's ``Request`` parses a POSTed form or multipart body into
``request.args`` before daphne sees the request (daphne never reads them),
and answers a multipart body it cannot parse with an empty 400 of its own:
no JSON, no content type, and Django never gets to say what was wrong. With
parsing off, Django reads the body, and the API answers a bad one as JSON
naming it (runs/api).
"""

from __future__ import annotations

from daphne.http_protocol import WebRequest


def leave_bodies_to_django() -> None:
    if getattr(WebRequest, "_zenweb_unparsed", False):
        return
    init = WebRequest.__init__

    def __init__(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs, parsePOSTFormSubmission=False)

    WebRequest.__init__ = __init__
    WebRequest._zenweb_unparsed = True
