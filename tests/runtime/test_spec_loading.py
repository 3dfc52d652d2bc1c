"""Loading a valid workflow: its summary and fields, step order, the round
trip through to_data, and the validation error that pickles."""

from __future__ import annotations

import pickle

import pytest

from agents.spec import WorkflowSpec, WorkflowValidationError, load_workflow, parse_workflow, validate_workflow
from tests.runtime.workflow_texts import CONTAINERS, workflow, write

HUB_AND_SPOKE = """\
name: hub_and_spoke
description: A researcher briefs two writers; an editor merges their drafts.
inputs:
  query: {type: string, required: true, description: What to research}
agents:
  researcher:
    description: researcher agent
    provider: scripted
    tools: [send_message]
    script:
      - calls: [{tool: send_message, args: {text: "for writer: focus on $query"}}]
      - say: "notes on $query"
  writer:
    description: writer agent
    system: You write short drafts.
    temperature: 0.2
    script:
      - {say: "draft", delay: 0.5}
  critic:
    description: critic agent
    script:
      - fail: simulated provider failure
  editor:
    description: editor agent
    model: gpt-4o-mini
steps:
  - id: research
    agent: researcher
    instructions: Research $query
  - id: draft
    agent: writer
    dependsOn: [research]
  - id: edit
    agent: editor
    dependsOn: [draft, research]
options:
  maxConcurrency: 2
  onStepFailure: skip-dependents
  stepTimeout: 30
"""


def test_it_loads_a_valid_file(tmp_path):
    path = write(tmp_path, HUB_AND_SPOKE)

    spec = load_workflow(path, known_tools={"send_message", "read_file"})

    assert spec.summary() == "hub_and_spoke v1: 3 steps, 4 agents"
    assert spec.inputs["query"].required is True
    assert spec.step("draft").depends_on == ["research"]
    assert spec.agents["researcher"].script[0].calls[0].args == {"text": "for writer: focus on $query"}
    assert spec.agents["writer"].script[0].delay == 0.5
    assert spec.options.on_step_failure == "skip-dependents"
    assert spec.options.max_turns == 50
    assert spec.options.step_timeout == 30
    assert validate_workflow(path) == []


def test_it_says_one_step_and_one_agent():
    spec = parse_workflow(workflow("  - {id: only, agent: a1}\n"))

    assert spec.summary() == "flow v1: 1 step, 1 agent"


def test_it_orders_steps_after_their_dependencies_keeping_file_order():
    spec = parse_workflow(
        workflow(
            """\
            - {id: publish, agent: a1, dependsOn: [edit]}
            - {id: research, agent: a1}
            - {id: edit, agent: a1, dependsOn: [draft]}
            - {id: draft, agent: a1, dependsOn: [research]}
            - {id: notes, agent: a1}
            """
        )
    )

    assert spec.topological_order() == ["research", "draft", "edit", "publish", "notes"]
    assert spec.dependents("research") == ["draft"]
    assert spec.dependents("research", transitive=True) == ["publish", "edit", "draft"]


def test_it_round_trips_through_to_data():
    spec = parse_workflow(HUB_AND_SPOKE)

    data = spec.to_data()

    assert data["options"]["onStepFailure"] == "skip-dependents"
    assert data["steps"][1]["dependsOn"] == ["research"]
    assert WorkflowSpec.model_validate(data) == spec


def test_it_refuses_a_cycle_even_without_the_loader():
    data = parse_workflow(HUB_AND_SPOKE).to_data()
    data["steps"][0]["dependsOn"] = ["edit"]

    with pytest.raises(ValueError, match="dependency cycle: research -> edit"):
        WorkflowSpec.model_validate(data)


def test_it_pickles_the_error_with_its_problems():
    with pytest.raises(WorkflowValidationError) as caught:
        parse_workflow("name: flow\n", source="flow.yaml")

    copy = pickle.loads(pickle.dumps(caught.value))

    assert copy.problems == caught.value.problems
    assert str(copy) == str(caught.value)


def test_it_round_trips_containers_through_to_data():
    for name in ("loop", "judged", "foreach", "include"):
        spec = load_workflow(CONTAINERS / f"{name}.yaml")

        data = spec.to_data()

        assert WorkflowSpec.model_validate(data) == spec
    assert data["steps"][0]["with"] == {"target": "$env-1"}
    assert data["steps"][0]["included"]["name"] == "staging"


def test_it_keeps_plain_steps_as_they_were():
    spec = parse_workflow(HUB_AND_SPOKE)

    assert [(s.id, s.agent, s.kind) for s in spec.steps] == [
        ("research", "researcher", "step"),
        ("draft", "writer", "step"),
        ("edit", "editor", "step"),
    ]
