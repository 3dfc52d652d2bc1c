"""Agent-as-tool: a step calls another catalog workflow as a tool; the child
run's result comes back as the tool result."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from agents.tools.builtin.result_models import WorkflowToolResult
from runs.actions import do_cancel_run, do_create_run, do_register_workflow
from runs.models import Run, Step
from tests.conftest import WORKFLOWS, assert_gapless, register, wait_for, wait_for_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_returns_a_child_runs_result_as_the_tool_result(celery_worker):
    register("tools/summarize_topic")
    register("tools/failing_topic")
    run = wait_for_run(do_create_run(register("tools/delegating"), {}))

    call = run.tool_calls.get(name="summarize_topic")
    [child] = call.child_runs.all()
    assert child.status == Run.Status.COMPLETED
    assert child.inputs == {"topic": "laptops"}
    assert (call.status, call.ok) == ("done", True)
    # Typed as the tool's result model says (tool_schemas.json's WorkflowToolResult).
    answer = json.loads(call.result)
    assert answer == {"result": {"run_id": child.pk, "workflow": "summarize_topic", "summary": child.result}}
    assert "summary of laptops" in child.result
    jsonschema.validate(answer, WorkflowToolResult.model_json_schema())
    caller = run.steps.get(step_id="caller")
    assert {"role": "tool", "tool_call_id": call.tool_call_id, "content": call.result} in caller.transcript
    assert run.status == Run.Status.COMPLETED
    assert caller.output == "caller done"


def test_it_links_parent_and_child_both_ways(celery_worker):
    register("tools/summarize_topic")
    register("tools/failing_topic")
    run = wait_for_run(do_create_run(register("tools/delegating"), {}))

    call = run.tool_calls.get(name="summarize_topic")
    child = call.child_runs.get()
    linked = run.events.get(type="child_run_linked", data__parent_tool_call_id=call.tool_call_id)
    assert linked.data == {
        "run_id": child.pk,
        "agent_id": "summarize_topic",
        "parent_run_id": run.pk,
        "parent_tool_call_id": call.tool_call_id,
    }
    start = child.events.get(type="workflow_start")
    assert (start.data["parent_run_id"], start.data["parent_tool_call_id"]) == (run.pk, call.tool_call_id)
    # The child's own tool calls know whom they work for.
    assert run.events.filter(type="child_run_result", data__run_id=child.pk).exists()
    assert_gapless(run)
    assert_gapless(child)


def test_it_gives_the_caller_an_error_result_when_the_child_run_fails(celery_worker):
    register("tools/summarize_topic")
    register("tools/failing_topic")
    run = wait_for_run(do_create_run(register("tools/delegating"), {}))

    call = run.tool_calls.get(name="failing_topic")
    assert (call.status, call.ok, call.error_kind) == ("failed", False, "unavailable")
    assert call.result.startswith(f"error: run {call.child_runs.get().pk} of failing_topic ended failed")
    assert "the summarizer is down" in call.result
    # The caller read the error and went on.
    assert run.steps.get(step_id="caller").output == "caller done"


def test_it_cancels_the_child_run_with_its_parent(celery_worker):
    register("tools/slow_topic")
    run = do_create_run(register("tools/waiting"), {})
    deadline = time.monotonic() + 20
    while not Run.objects.filter(parent_tool_call__run=run).exists():
        assert time.monotonic() < deadline, "the child run never started"
        time.sleep(0.05)

    do_cancel_run(run.pk, "stop")

    child = wait_for_run(Run.objects.get(parent_tool_call__run=run))
    assert child.status == Run.Status.CANCELLED
    assert child.error == f"parent run {run.pk} ended cancelled"


def test_it_cancels_the_child_run_of_a_step_cancelled_while_its_run_goes_on(celery_worker):
    register("tools/slow_topic")
    run = do_create_run(register("tools/waiting_cancelled"), {})

    child = wait_for(lambda: Run.objects.filter(parent_tool_call__run=run, status=Run.Status.CANCELLED).first())

    caller = run.steps.get(step_id="caller")
    assert caller.status == Step.Status.CANCELLED
    assert child.error == f"parent step caller of run {run.pk} ended cancelled"
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING  # trigger is still at work
    assert wait_for_run(run).status == Run.Status.PARTIAL


def test_a_run_started_by_a_tool_call_starts_no_runs_of_its_own(celery_worker):
    text = (WORKFLOWS / "tools" / "recurse.yaml").read_text()
    first = [line for line in text.splitlines(keepends=True) if "recurse]" not in line and "tool: recurse" not in line]
    do_register_workflow("".join(first), "recurse v1")  # the tool exists before a version calls it
    run = wait_for_run(do_create_run(register("tools/recurse"), {"topic": "top"}))

    assert (run.status, run.steps.get(step_id="work").output) == (Run.Status.COMPLETED, "done with top")
    children = Run.objects.exclude(pk=run.pk)
    assert sorted(children.values_list("inputs__topic", "status")) == [("a", "completed"), ("b", "completed")]
    for child in children:
        refusals = child.tool_calls.filter(name="recurse")
        assert [call.ok for call in refusals] == [False, False]
        assert f"recurse cannot start from run {child.pk}: a run started by a tool call starts no runs" in (
            refusals[0].result
        )
