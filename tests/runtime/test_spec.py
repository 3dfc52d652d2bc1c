from __future__ import annotations

import pickle
import textwrap

import pytest

from agents.spec import (
    WorkflowSpec,
    WorkflowValidationError,
    load_workflow,
    parse_workflow,
    validate_workflow,
)
from agents.yaml_locations import line_for, parse_with_locations

HUB_AND_SPOKE = """\
name: hub_and_spoke
description: A researcher briefs two writers; an editor merges their drafts.
inputs:
  query: {type: string, required: true, description: What to research}
agents:
  researcher:
    provider: scripted
    tools: [send_message]
    script:
      - calls: [{tool: send_message, args: {text: "for writer: focus on $query"}}]
      - say: "notes on $query"
  writer:
    system: You write short drafts.
    temperature: 0.2
    script:
      - {say: "draft", delay: 0.5}
  critic:
    script:
      - fail: simulated provider failure
  editor:
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


def write(tmp_path, text, name="flow.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(path, known_tools=None):
    return [str(problem) for problem in validate_workflow(path, known_tools)]


def workflow(steps, agents="agents: {a1: {}}"):
    """A minimal workflow around the given ``steps:`` block (lines 3 onwards)."""
    return f"name: flow\n{agents}\nsteps:\n{textwrap.dedent(steps)}"


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


def test_it_rejects_an_unknown_field_with_its_line(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - id: one
              agent: a1
              instruction: typo
            """
        ),
    )

    assert problems(path) == [
        (f"{path}:6: steps[0].instruction: unknown field 'instruction' (did you mean 'instructions'?)")
    ]


def test_it_lists_the_allowed_fields_when_nothing_is_close(tmp_path):
    path = write(tmp_path, workflow("  - {id: one, agent: a1}\noptions: {colour: red}\n"))

    assert problems(path) == [
        (
            f"{path}:5: options.colour: unknown field 'colour' (allowed: maxConcurrency, "
            "maxTurns, onStepFailure, stepTimeout, timeout)"
        )
    ]


def test_it_rejects_an_unknown_agent_listing_the_defined_ones(tmp_path):
    path = write(
        tmp_path,
        workflow(
            "  - id: one\n    agent: ghost\n",
            agents="agents: {zed: {}, amy: {}}",
        ),
    )

    assert problems(path) == [f"{path}:5: steps[0].agent: unknown agent 'ghost'; defined agents: amy, zed"]


def test_it_rejects_a_dependency_on_an_unknown_step(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - id: research
              agent: a1
            - id: write
              agent: a1
              dependsOn: [research, reserch]
            """
        ),
    )

    assert problems(path) == [(f"{path}:8: steps[1].dependsOn[1]: unknown step 'reserch' (did you mean 'research'?)")]


def test_it_rejects_a_step_that_depends_on_itself(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - id: loop
              agent: a1
              dependsOn:
                - loop
            """
        ),
    )

    assert problems(path) == [f"{path}:7: steps[0].dependsOn[0]: step 'loop' depends on itself"]


def test_it_reports_a_cycle_with_its_path(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - id: a
              agent: a1
              dependsOn: [b]
            - id: b
              agent: a1
              dependsOn: [a]
            """
        ),
    )

    assert problems(path) == [f"{path}:6: steps[0].dependsOn[0]: dependency cycle: a -> b -> a"]


def test_it_starts_a_longer_cycle_at_its_first_step_in_the_file(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - {id: start, agent: a1, dependsOn: [c]}
            - {id: a, agent: a1, dependsOn: [b]}
            - {id: b, agent: a1, dependsOn: [c]}
            - {id: c, agent: a1, dependsOn: [a]}
            """
        ),
    )

    # The search enters the cycle at c, by way of start, which is not part of it.
    assert problems(path) == [f"{path}:5: steps[1].dependsOn[0]: dependency cycle: a -> b -> c -> a"]


def test_it_rejects_a_step_id_that_breaks_the_pattern(tmp_path):
    path = write(tmp_path, workflow("  - id: Write Draft\n    agent: a1\n"))

    assert problems(path) == [
        (
            f"{path}:4: steps[0].id: invalid name 'Write Draft': use lowercase letters, "
            "digits, '_' and '-', starting with a letter, at most 64 characters"
        )
    ]


def test_it_rejects_duplicate_step_ids_at_the_later_one(tmp_path):
    path = write(
        tmp_path,
        workflow(
            """\
            - id: draft
              agent: a1
            - id: draft
              agent: a1
            """
        ),
    )

    assert problems(path) == [f"{path}:6: steps[1].id: duplicate step id 'draft' (first used by steps[0])"]


def test_it_rejects_more_than_100_steps(tmp_path):
    steps = "".join(f"  - {{id: s{n}, agent: a1}}\n" for n in range(101))
    path = write(tmp_path, workflow(steps))

    assert problems(path) == [f"{path}:3: steps: List should have at most 100 items, not 101"]


def test_it_rejects_a_description_over_2000_characters(tmp_path):
    text = workflow("  - {id: one, agent: a1}\n") + f"description: {'x' * 2001}\n"
    path = write(tmp_path, text)

    assert problems(path) == [f"{path}:5: description: String should have at most 2000 characters"]


def test_it_reports_malformed_yaml_with_its_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1: {}
        steps:
          - id: one
            agent: [a1
        """,
    )

    assert problems(path) == [f"{path}:7: invalid YAML: expected ',' or ']', but got '<stream end>'"]


def test_it_reports_a_key_repeated_in_one_mapping(tmp_path):
    path = write(tmp_path, workflow("  - id: one\n    agent: a1\n    agent: a2\n"))

    assert problems(path) == [f"{path}:6: invalid YAML: found duplicate key 'agent'"]


def test_it_rejects_a_document_that_is_not_a_mapping(tmp_path):
    path = write(tmp_path, "- name: flow\n- steps: []\n")

    assert problems(path) == [f"{path}:1: a workflow must be a mapping of fields, not a list"]


def test_it_rejects_an_empty_file(tmp_path):
    path = write(tmp_path, "# nothing here yet\n")

    assert problems(path) == [f"{path}:1: the workflow is empty"]


def test_it_reports_a_missing_file(tmp_path):
    path = tmp_path / "missing.yaml"

    with pytest.raises(WorkflowValidationError) as caught:
        load_workflow(path)

    assert str(caught.value) == f"{path}: file not found"


def test_it_reports_a_missing_required_field_at_its_parent(tmp_path):
    path = write(tmp_path, workflow("  - id: one\n    instructions: hi\n"))

    assert problems(path) == [f"{path}:4: steps[0].agent: required field missing"]


def test_it_rejects_a_script_turn_with_both_say_and_calls(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1:
            script:
              - say: hello
                calls: [{tool: send_message}]
        steps:
          - {id: one, agent: a1}
        """,
    )

    assert problems(path) == [
        (f"{path}:5: agents.a1.script[0]: a script turn needs exactly one of say, calls, fail (found say and calls)")
    ]


def test_it_rejects_an_unknown_tool_when_the_known_tools_are_given(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1:
            tools:
              - send_message
              - search_web
        steps:
          - {id: one, agent: a1}
        """,
    )

    assert problems(path) == []
    assert problems(path, known_tools={"send_message", "narrate"}) == [
        (f"{path}:6: agents.a1.tools[1]: unknown tool 'search_web'; known tools: narrate, send_message")
    ]


def test_it_reports_every_problem_at_once_sorted_by_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1: {}
        steps:
          - id: one
            agent: a1
            dependsOn: [ghost]
          - id: two
            agent: nobody
          - id: one
            agent: a1
        """,
    )

    assert problems(path) == [
        f"{path}:7: steps[0].dependsOn[0]: unknown step 'ghost'",
        f"{path}:9: steps[1].agent: unknown agent 'nobody'; defined agents: a1",
        f"{path}:10: steps[2].id: duplicate step id 'one' (first used by steps[0])",
    ]


def test_it_reports_every_field_error_at_once_sorted_by_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        version: 0
        agents:
          a1: {temperature: 3}
        steps:
          - {id: one, agent: a1}
        options:
          onStepFailure: retry
        """,
    )

    assert problems(path) == [
        f"{path}:2: version: Input should be greater than or equal to 1",
        f"{path}:4: agents.a1.temperature: Input should be less than or equal to 2",
        (f"{path}:8: options.onStepFailure: Input should be 'cascade', 'skip-dependents' or 'abort'"),
    ]


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


def test_it_maps_yaml_locations_to_lines():
    data, lines = parse_with_locations("steps:\n  - id: a\n    dependsOn:\n      - b\n")

    assert data == {"steps": [{"id": "a", "dependsOn": ["b"]}]}
    assert lines[("steps",)] == 1
    assert lines[("steps", 0)] == 2
    assert lines[("steps", 0, "dependsOn", 0)] == 4
    assert line_for(lines, ("steps", 0, "agent")) == 2


def test_it_refuses_aliases_that_expand_without_bound(tmp_path):
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for n in range(1, 7):
        levels.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    path = write(tmp_path, "\n".join(levels) + "\n")

    assert problems(path) == [f"{path}:5: invalid YAML: the document expands to more than 100000 values"]
