"""Forking a run from the run page, and comparing two runs."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from runs.actions.catalog import InputError
from runs.actions.forks import do_fork_run
from runs.compare import compare
from runs.models import Run, Step
from runs.views.access import run_for_user


@require_POST
def run_fork(request: HttpRequest, run_id: int) -> HttpResponse:
    """Fork the run at the chosen step, its instructions as edited (left as
    they were: unchanged); the new run's page, or this one's with why not."""
    parent = run_for_user(request, run_id)
    step_id = request.POST.get("step", "").strip()
    instructions = request.POST.get("instructions", "")
    current = parent.steps.filter(step_id=step_id).values_list("instructions", flat=True).first()
    edited = instructions.strip() if instructions.strip() and instructions.strip() != (current or "").strip() else None
    try:
        run = do_fork_run(parent, step_id, user=request.user, instructions=edited)
    except InputError as exc:
        messages.error(request, f"could not fork run {parent.pk}: {exc}")
        return redirect("runs:detail", run_id=parent.pk)
    messages.success(request, f"run #{run.pk} forked from run #{parent.pk} at step {step_id}")
    return redirect("runs:detail", run_id=run.pk)


def run_compare(request: HttpRequest) -> HttpResponse:
    """Two runs side by side: ?a=<id>&b=<id> (each one the person may see)."""
    ids = [request.GET.get(name, "").strip().lstrip("#") for name in ("a", "b")]
    if not all(i.isdigit() and len(i) < 19 for i in ids):
        return render(request, "runs/compare.html", {"error": "give two run numbers to compare"}, status=400)
    a, b = (run_for_user(request, int(i)) for i in ids)
    return render(request, "runs/compare.html", {"comparison": compare(a, b)})


def fork_context(run: Run) -> dict:
    """What the run page's fork card shows: the steps a run that ended may
    be forked at, with their instructions; and the run it was forked from."""
    steps = []
    if run.is_terminal:
        rows = run.steps.filter(kind=Step.Kind.STEP, spawned_by="").order_by("position")
        steps = list(rows.values("step_id", "instructions"))
    return {"fork_steps": steps}
