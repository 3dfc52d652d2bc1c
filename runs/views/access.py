"""The run a page is about, if its user may see it: every run page starts here."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from runs import actions
from runs.models import Run


def run_for_user(request: HttpRequest, run_id: int) -> Run:
    """Run ``run_id`` if ``request.user`` may see it; a 404 otherwise, the
    same for a run that does not exist as for one of someone else's."""
    try:
        return actions.access_run(request.user, run_id)
    except Run.DoesNotExist:
        raise Http404("No such run") from None
