"""Every write that changes a run's state, and the events that record it.

``do_*`` functions write; ``check_*`` validate input and raise with a clear
message; ``access_*`` fetch with a permission check. Views, commands, tasks
and consumers call these and stay thin. Each ``do_*`` runs in a transaction,
and its events commit with it (runs/store/events.py broadcasts them after commit).

catalog.py     workflow versions, run inputs, the tool registry
lifecycle.py   creating and starting runs
ending.py      finishing, failing, cancelling and blocking runs
scheduling.py  which steps start, when the coordinator wakes (agents/core decides)
run_states.py  the state machine's view of a run, from its step rows
not_started.py steps that end before they start: a false condition, one that failed
steps.py       step turns and wake cycles
model_calls.py a step's model call: what it is given, its provider, what it reports
step_ends.py   failed and cancelled steps, failure policies, loop iterations
lost_loops.py  what a loop whose iteration ended waits on, queued again on resume
deadlines.py   run and step timeouts
resume.py      one-turn resumes of completed steps
coordinator.py the coordinator's wakes
access.py      visibility rules

The modules are layered (pyproject.toml's runs.actions contract): none
imports one above it, and the tasks are queued by name (runs/queue.py).
"""

from __future__ import annotations

from runs.actions.access import access_run, control_refusal, may_control, visible_runs
from runs.actions.catalog import (
    REGISTRY,
    InputError,
    check_inputs,
    do_load_catalog,
    do_register_workflow,
    workflow_spec,
)
from runs.actions.common import router_for
from runs.actions.coordinator import do_coordinator_wake
from runs.actions.ending import do_cancel_run, do_fail_run, do_finish_run
from runs.actions.lifecycle import TooManyRuns, active_runs_refusal, do_create_run, do_start_run
from runs.actions.offers import NotOffered, offered_workflows, start_refusal
from runs.actions.resume import do_fail_resume, do_resume_turn
from runs.actions.scheduling import Eager, EagerTurn, EagerWake, do_schedule_run_of, schedule, take_queued_turn
from runs.actions.step_ends import do_fail_step
from runs.actions.steps import do_eager_turn, do_step_turn

__all__ = [
    "Eager",
    "EagerTurn",
    "EagerWake",
    "do_eager_turn",
    "REGISTRY",
    "InputError",
    "TooManyRuns",
    "NotOffered",
    "offered_workflows",
    "start_refusal",
    "access_run",
    "control_refusal",
    "may_control",
    "check_inputs",
    "do_cancel_run",
    "do_coordinator_wake",
    "do_schedule_run_of",
    "active_runs_refusal",
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
    "take_queued_turn",
    "visible_runs",
    "workflow_spec",
]
