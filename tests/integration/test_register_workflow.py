"""Registering a workflow checks who may call each tool an agent lists, with
the roles the run would give them: builtins from the registry, and catalog
workflows offered as tools (steps only)."""

from __future__ import annotations

import pytest

from agents.spec import WorkflowValidationError
from runs.actions import do_load_catalog, do_register_workflow
from runs.models import Workflow
from tests.conftest import register

pytestmark = pytest.mark.django_db

COORDINATOR_TOOL_ON_A_STEP = """\
name: misrouted
agents:
  writer:
    description: writer agent
    tools: [narrate]
steps:
  - {id: one, agent: writer}
"""

OFFERED_TOOL = """\
name: delegated
agents:
  coordinator:
    description: coordinator agent
    tools: [summarize_topic]
  caller:
    description: caller agent
    tools: [summarize_topic]
steps:
  - {id: one, agent: caller}
"""


def test_it_refuses_a_coordinator_tool_on_an_agent_that_runs_steps():
    with pytest.raises(WorkflowValidationError) as caught:
        do_register_workflow(COORDINATOR_TOOL_ON_A_STEP, "misrouted.yaml")

    assert [str(p) for p in caught.value.problems] == [
        "misrouted.yaml:5: agents.writer.tools[0]: tool 'narrate' is only available to the coordinator "
        "(the agent named 'coordinator'), and agent 'writer' runs steps"
    ]


def test_a_workflow_offered_as_a_tool_is_for_steps_only():
    register("tools/summarize_topic")

    with pytest.raises(WorkflowValidationError) as caught:
        do_register_workflow(OFFERED_TOOL, "delegated.yaml")
    # Offered by a file registered in the same batch, it is known the same way.
    with pytest.raises(WorkflowValidationError) as batch:
        do_register_workflow(
            OFFERED_TOOL.replace("summarize_topic", "brief_topic"), "delegated.yaml", also_offered=["brief_topic"]
        )

    assert [str(p) for p in caught.value.problems] == [
        "delegated.yaml:5: agents.coordinator.tools[0]: tool 'summarize_topic' is only available to steps, "
        "and agent 'coordinator' is the run's coordinator; list it on an agent that runs steps"
    ]
    assert [p.field for p in batch.value.problems] == ["agents.coordinator.tools[0]"]


def offering(name: str, tool: str) -> str:
    return f"""\
name: {name}
tool:
  name: {tool}
agents:
  worker:
    description: worker agent
    script: [{{say: done}}]
steps:
  - {{id: one, agent: worker}}
"""


def test_it_refuses_a_workflow_tool_named_like_a_builtin():
    with pytest.raises(WorkflowValidationError) as caught:
        do_register_workflow(offering("shadow", "search"), "shadow.yaml")

    assert [str(p) for p in caught.value.problems] == [
        "shadow.yaml:3: tool.name: 'search' is the name of a builtin tool: "
        "agents listing it would never get this workflow"
    ]


def test_it_refuses_a_tool_name_another_workflow_offers_and_names_it():
    register("tools/summarize_topic")

    with pytest.raises(WorkflowValidationError) as caught:
        do_register_workflow(offering("copycat", "summarize_topic"), "copycat.yaml")
    # A new version of the workflow that offers it keeps its name.
    do_register_workflow(offering("summarize_topic", "summarize_topic"), "summarize_topic_v2.yaml")

    (problem,) = caught.value.problems
    assert (problem.source, problem.line, problem.field) == ("copycat.yaml", 3, "tool.name")
    assert problem.message.startswith("'summarize_topic' is already offered by workflow 'summarize_topic' (")
    assert "tools/summarize_topic.yaml" in problem.message


def test_it_refuses_a_catalog_whose_files_offer_one_tool_name_twice_and_registers_none(tmp_path):
    (tmp_path / "a.yaml").write_text(offering("first", "brief_topic"))
    (tmp_path / "b.yaml").write_text(offering("second", "brief_topic"))

    with pytest.raises(WorkflowValidationError) as caught:
        do_load_catalog(tmp_path)

    both = f"{tmp_path / 'a.yaml'}, {tmp_path / 'b.yaml'}"
    assert [str(p) for p in caught.value.problems] == [
        f"{tmp_path / 'a.yaml'}:3: tool.name: 'brief_topic' is offered by more than one workflow: {both}",
        f"{tmp_path / 'b.yaml'}:3: tool.name: 'brief_topic' is offered by more than one workflow: {both}",
    ]
    assert not Workflow.objects.exists()
