"""Dashboard pages, one module per area; urls.py names them from here."""

from __future__ import annotations

from runs.views.approvals import approval_decide, approval_list
from runs.views.claims import claim_list
from runs.views.commands import command_create, command_detail, command_inputs, command_live, workflow_register
from runs.views.control import run_resume
from runs.views.demo import run_demo
from runs.views.events import run_events
from runs.views.export import export_events_schema, run_export
from runs.views.forks import run_compare, run_fork
from runs.views.questions import question_answer, run_question_answer
from runs.views.replay import run_replay
from runs.views.run_approvals import run_approval_decide, run_approvals
from runs.views.runs import catalog, run_cancel, run_detail, run_graph, run_list, run_start, step_transcript

__all__ = [
    "approval_decide",
    "approval_list",
    "catalog",
    "claim_list",
    "command_create",
    "command_detail",
    "command_inputs",
    "command_live",
    "export_events_schema",
    "run_approval_decide",
    "run_approvals",
    "question_answer",
    "run_question_answer",
    "run_cancel",
    "run_compare",
    "run_fork",
    "run_demo",
    "run_detail",
    "run_events",
    "run_export",
    "run_graph",
    "run_list",
    "run_replay",
    "run_resume",
    "run_start",
    "step_transcript",
    "workflow_register",
]
