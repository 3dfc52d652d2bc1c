"""Every write that changes a run's state, and the events that record it.

``do_*`` functions write; ``check_*`` validate input and raise with a clear
message; ``access_*`` fetch with a permission check. Views, commands, tasks
and consumers call these and stay thin. Each ``do_*`` runs in a transaction,
and its events commit with it (runs/store/events.py broadcasts them after commit).

catalog.py   workflow versions and run inputs
lifecycle.py creating, starting, finishing and cancelling runs
scheduling.py which steps start, when the coordinator wakes (agents/core decides)
steps.py     step turns, wake cycles, resumes, failure policies
coordinator.py the coordinator's wakes
access.py    visibility rules
"""

from __future__ import annotations

from runs.actions.access import access_run, control_refusal, visible_runs
from runs.actions.catalog import (
    InputError,
    check_inputs,
    do_load_catalog,
    do_register_workflow,
    workflow_spec,
)
from runs.actions.common import REGISTRY, router_for
from runs.actions.coordinator import do_coordinator_wake
from runs.actions.lifecycle import (
    do_cancel_run,
    do_create_run,
    do_fail_run,
    do_finish_run,
    do_start_run,
)
from runs.actions.scheduling import schedule
from runs.actions.steps import do_fail_resume, do_fail_step, do_resume_turn, do_step_turn

__all__ = [
    "REGISTRY",
    "InputError",
    "access_run",
    "control_refusal",
    "check_inputs",
    "do_cancel_run",
    "do_coordinator_wake",
    "do_create_run",
    "do_fail_resume",
    "do_fail_run",
    "do_fail_step",
    "do_finish_run",
    "do_load_catalog",
    "do_register_workflow",
    "do_resume_turn",
    "do_start_run",
    "do_step_turn",
    "router_for",
    "schedule",
    "visible_runs",
    "workflow_spec",
]
