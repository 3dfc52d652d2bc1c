"""Who may see what."""

from __future__ import annotations

from runs.models import Run


def visible_runs(user):
    """The runs ``user`` may see: staff see all, others their own."""
    runs = Run.objects.select_related("workflow", "created_by")
    return runs if user.is_staff else runs.filter(created_by=user)


def access_run(user, run_id: int) -> Run:
    """The run, if ``user`` may see it; Run.DoesNotExist otherwise (so a
    stranger cannot tell a hidden run from a missing one)."""
    if not user.is_authenticated:
        raise Run.DoesNotExist
    return visible_runs(user).get(pk=run_id)
