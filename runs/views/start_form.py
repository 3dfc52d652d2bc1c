"""The start form's workflows, and what a destructive one will do.

A destructive workflow is marked in the form's list and starts only with a
tick beside what it will do: its planned calls (the ones its approval will
show), rendered with its default inputs. The form has no default workflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.http import QueryDict

from runs.actions import workflow_spec
from runs.actions.approval_requests import planned_actions
from runs.actions.offers import start_refusal
from runs.models import Workflow


@dataclass(frozen=True)
class StartChoice:
    workflow: Workflow
    destructive: bool
    # What it will do, one line per planned call (destructive ones only).
    plan: list[str] = field(default_factory=list)


def start_choices(workflows: Iterable[Workflow]) -> list[StartChoice]:
    choices = []
    for workflow in workflows:
        spec = workflow_spec(workflow)
        if not spec.destructive:
            choices.append(StartChoice(workflow, destructive=False))
            continue
        defaults = {name: declared.default for name, declared in spec.inputs.items() if declared.default is not None}
        plan = [_plan_line(action) for action in planned_actions(spec, defaults)]
        choices.append(StartChoice(workflow, destructive=True, plan=plan or ["calls decided while it runs"]))
    return choices


def _plan_line(action: dict) -> str:
    if action.get("at_run_time"):
        return f"{action['agent']}: {action['tool']} (its arguments are decided while it runs)"
    arguments = action["arguments"]
    if action["tool"] == "run_shell" and set(arguments) == {"command"}:
        return f"{action['agent']}: {arguments['command']}"
    return f"{action['agent']}: {action['tool']} {json.dumps(arguments, sort_keys=True)}"


def unconfirmed_destructive(workflow: Workflow, form: QueryDict) -> str | None:
    """Why a start of ``workflow`` from the form is refused for want of the
    tick beside what it will do; None when it is not destructive or ticked,
    or may not start at all (the start says why: a retired version, say)."""
    if not workflow_spec(workflow).destructive or form.get("confirm") == str(workflow.pk):
        return None
    if start_refusal(workflow):
        return None
    return (
        f"{workflow.name} is destructive: tick “I understand what it will do” beside its planned calls to start it "
        "(it then waits for an approver)"
    )
