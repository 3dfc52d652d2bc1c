"""Who may see what."""

from __future__ import annotations

from django.db.models import Q

from runs.models import Approval, Run


def visible_runs(user):
    """The runs ``user`` may see: staff see all, others their own, and a
    person who may decide approvals also the runs that asked for one (the
    approvals queue links to them: a decision needs the run's context)."""
    runs = _runs()
    if user.is_staff:
        return runs
    if user.has_perm("runs.decide_approval"):
        return runs.filter(Q(created_by=user) | Q(pk__in=Approval.objects.values("run_id")))
    return runs.filter(created_by=user)


def access_run(user, run_id: int) -> Run:
    """The run, if ``user`` may see it; Run.DoesNotExist otherwise (so a
    stranger cannot tell a hidden run from a missing one)."""
    if not user.is_authenticated:
        raise Run.DoesNotExist
    if user.is_staff:
        return visible_runs(user).get(pk=run_id)
    try:
        # One query for the usual case, someone's own run: their permissions
        # (two more) are read only for a run they did not start.
        return _runs().get(pk=run_id, created_by=user)
    except Run.DoesNotExist:
        return visible_runs(user).get(pk=run_id)


def may_control(user, run: Run) -> bool:
    """Whether ``user`` may cancel or resume ``run``: staff, or the person
    who started it. An approver sees the runs that ask for a decision in
    order to decide; stopping them is not theirs to do."""
    return user.is_staff or (run.created_by_id is not None and run.created_by_id == user.pk)


def control_refusal(user, run: Run, what: str) -> str:
    """Why ``user`` may not ``what`` (cancel, resume) ``run``; "" if they may."""
    return "" if may_control(user, run) else f"only the person who started run {run.pk}, or staff, may {what} it"


def _runs():
    return Run.objects.select_related("workflow", "created_by")
