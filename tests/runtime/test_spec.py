from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from agents.spec import (
    WorkflowSpec,
    WorkflowValidationError,
    load_workflow,
    parse_workflow,
    validate_workflow,
)
from agents.spec.yaml_locations import line_for, parse_with_locations

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
            f"{path}:5: options.colour: unknown field 'colour' (allowed: budget, holdTimeout, maxConcurrency, "
            "maxConsecutiveToolFailures, maxEmptyAnswerRetries, maxMailboxSize, maxRunToolCalls, maxToolCalls, "
            "maxTurns, maxWakeCycles, maxWorkers, onStepFailure, sandbox, stepMaxWakeCycles, stepTimeout, timeout, "
            "toolExecution, toolTimeout, toolTimeouts, workerAgent)"
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


# -- containers: loops and includes ----------------------------------------------------

CONTAINERS = Path(__file__).parent.parent / "workflows" / "containers"


def container_workflow(steps, inputs=""):
    """A workflow with agents a1 and judge around the given ``steps:`` block
    (lines 4 onwards, or later with ``inputs``)."""
    return f"name: flow\nagents: {{a1: {{}}, judge: {{}}}}\n{inputs}steps:\n{textwrap.dedent(steps)}"


def test_it_loads_a_repeat_until_loop():
    spec = load_workflow(CONTAINERS / "loop.yaml")

    refine = spec.step("refine")
    assert refine.kind == "loop"
    assert refine.agent is None
    assert refine.depends_on == ["research"]
    assert refine.loop.kind == "repeat"
    assert refine.loop.max_iterations == 3
    assert refine.loop.until == "APPROVED"
    assert [s.id for s in refine.loop.steps] == ["draft", "review"]
    assert refine.loop.steps[1].depends_on == ["draft"]
    assert spec.step("publish").depends_on == ["refine"]
    assert spec.summary() == "loop v1: 4 steps, 1 repeat loop, 3 agents"


def test_it_loads_a_loop_judged_by_an_agent():
    spec = load_workflow(CONTAINERS / "judged.yaml")

    assert spec.step("polish").loop.until_agent == "judge"
    assert spec.step("polish").loop.until is None


def test_it_loads_a_for_each_loop():
    spec = load_workflow(CONTAINERS / "foreach.yaml")

    deploy = spec.step("deploy").loop
    assert deploy.kind == "forEach"
    assert deploy.for_each == "regions"
    assert deploy.max_concurrency == 2
    assert spec.summary() == "foreach v1: 4 steps, 1 forEach loop, 2 agents"


def test_it_loads_an_include_and_merges_its_agents():
    spec = load_workflow(CONTAINERS / "include.yaml")

    staging = spec.step("staging")
    assert staging.kind == "include"
    assert staging.include == "sub/staging.yaml"
    assert staging.with_ == {"target": "$env-1"}
    assert staging.included.name == "staging"
    assert [s.id for s in staging.included.steps] == ["build", "test"]
    assert sorted(spec.agents) == ["announcer", "builder", "tester"]
    assert spec.summary() == "include v1: 3 steps, 1 include, 3 agents"


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


def test_it_requires_max_iterations_for_a_repeat_until_loop(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                until: DONE
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:5: steps[0].loop.maxIterations: required field missing: "
        "a repeat-until loop needs maxIterations (1 to 100)"
    ]


def test_it_caps_max_iterations_at_100(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxIterations: 101
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:6: steps[0].loop.maxIterations: Input should be less than or equal to 100",
    ]


def test_it_rejects_until_together_with_until_agent(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxIterations: 2
                until: DONE
                untilAgent: judge
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [f"{path}:8: steps[0].loop.untilAgent: give until or untilAgent, not both"]


def test_it_rejects_an_unknown_until_agent(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxIterations: 2
                untilAgent: jduge
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [f"{path}:7: steps[0].loop.untilAgent: unknown agent 'jduge'; defined agents: a1, judge"]


def test_it_rejects_for_each_over_an_undeclared_input(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: deploy
              loop:
                forEach: region
                steps:
                  - {id: ship, agent: a1}
            """,
            inputs="inputs: {regions: {default: 'eu,us'}}\n",
        ),
    )

    assert problems(path) == [
        f"{path}:7: steps[0].loop.forEach: unknown input 'region' (did you mean 'regions'?); declared inputs: regions"
    ]


def test_it_wants_a_string_input_for_for_each(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: deploy
              loop:
                forEach: count
                maxIterations: 3
                steps:
                  - {id: ship, agent: a1}
            """,
            inputs="inputs: {count: {type: integer}}\n",
        ),
    )

    assert problems(path) == [
        f"{path}:7: steps[0].loop.forEach: input 'count' is integer; forEach needs a string input "
        "(a JSON list or comma-separated values)",
        f"{path}:8: steps[0].loop.maxIterations: maxIterations belongs to repeat-until loops; "
        "a forEach loop runs once per item",
    ]


def test_it_rejects_a_container_step_with_an_agent_or_instructions(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              agent: a1
              instructions: Do it again.
              loop:
                maxIterations: 2
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:5: steps[0].agent: a loop step has no agent; its inner steps name theirs",
        f"{path}:6: steps[0].instructions: a loop step has no instructions; its inner steps carry them",
    ]


def test_it_rejects_a_step_with_both_loop_and_include(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: both
              include: sub.yaml
              loop:
                maxIterations: 2
                steps:
                  - {id: draft, agent: a1}
            """
        ),
    )
    write(tmp_path, "name: sub\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n", "sub.yaml")

    assert problems(path) == [f"{path}:5: steps[0].include: a step has either loop or include, not both"]


def test_it_rejects_an_unknown_dependency_inside_a_loop(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxIterations: 2
                steps:
                  - {id: draft, agent: a1}
                  - {id: review, agent: a1, dependsOn: [drfat]}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:9: steps[0].loop.steps[1].dependsOn[0]: unknown step 'drfat' (did you mean 'draft'?)"
    ]


def test_it_keeps_inner_ids_local_to_their_loop(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - {id: draft, agent: a1}
            - id: refine
              dependsOn: [draft]
              loop:
                maxIterations: 2
                steps:
                  - {id: draft, agent: a1}
                  - {id: review, agent: a1, dependsOn: [draft, refine]}
            """
        ),
    )

    # The inner draft may reuse a top-level id; the loop's own id is not a sibling.
    assert problems(path) == [
        f"{path}:11: steps[1].loop.steps[1].dependsOn[1]: unknown step 'refine' (did you mean 'review'?)"
    ]


def test_it_reports_a_cycle_inside_a_loop(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxIterations: 2
                steps:
                  - {id: draft, agent: a1, dependsOn: [review]}
                  - {id: review, agent: a1, dependsOn: [draft]}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:8: steps[0].loop.steps[0].dependsOn[0]: dependency cycle: draft -> review -> draft",
        f"{path}:9: steps[0].loop.steps[1]: the last step of a repeat-until loop must be one no other "
        "inner step depends on: its output ends the iteration",
    ]


def test_it_wants_a_repeat_until_loop_to_end_on_an_agent_step(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: outer
              loop:
                maxIterations: 2
                steps:
                  - id: inner
                    loop:
                      maxIterations: 2
                      steps:
                        - {id: draft, agent: a1}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:8: steps[0].loop.steps[0]: the last step of a repeat-until loop must run an agent: "
        "its output ends the iteration"
    ]


def test_it_limits_loops_to_five_levels(tmp_path):
    steps = "- id: l1\n"
    indent = ""
    for n in range(1, 7):
        steps += f"{indent}  loop:\n{indent}    forEach: items\n{indent}    steps:\n"
        indent += "      "
        steps += f"{indent}- id: l{n + 1}\n" if n < 6 else f"{indent}- {{id: leaf, agent: a1}}\n"
    path = write(tmp_path, container_workflow(steps, inputs="inputs: {items: {}}\n"))

    assert problems(path) == [f"{path}:26: steps[0]{'.loop.steps[0]' * 5}.loop: containers nest at most 5 deep"]


def test_it_rejects_an_include_that_leaves_the_folder(tmp_path):
    (tmp_path / "flows").mkdir()
    write(tmp_path, "name: outside\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n", "x.yaml")
    path = write(
        tmp_path,
        container_workflow(
            f"""\
            - {{id: up, include: ../x.yaml}}
            - {{id: absolute, include: {tmp_path / "x.yaml"}}}
            - {{id: sneaky, include: "sub/../../x.yaml"}}
            """
        ),
        "flows/flow.yaml",
    )

    assert problems(path) == [
        f"{path}:4: steps[0].include: include path '../x.yaml' leaves this workflow's folder ('..' is not allowed)",
        f"{path}:5: steps[1].include: include path '{tmp_path / 'x.yaml'}' is absolute; "
        "give a path relative to this workflow's folder",
        f"{path}:6: steps[2].include: include path 'sub/../../x.yaml' leaves this workflow's folder "
        "('..' is not allowed)",
    ]


def test_it_rejects_an_include_through_a_link_out_of_the_folder(tmp_path):
    (tmp_path / "flows").mkdir()
    write(tmp_path, "name: outside\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n", "x.yaml")
    (tmp_path / "flows" / "link.yaml").symlink_to(tmp_path / "x.yaml")
    path = write(tmp_path, container_workflow("- {id: linked, include: link.yaml}\n"), "flows/flow.yaml")

    assert problems(path) == [f"{path}:4: steps[0].include: include path 'link.yaml' leaves this workflow's folder"]


def test_it_reports_a_missing_include_file(tmp_path):
    path = write(tmp_path, container_workflow("- {id: staging, include: sub/staging.yaml}\n"))

    assert problems(path) == [f"{path}:4: steps[0].include: included file not found: sub/staging.yaml"]


def test_it_reports_an_include_cycle_with_its_chain(tmp_path):
    write(tmp_path, container_workflow("- {id: to_b, include: b.yaml}\n"), "a.yaml")
    write(tmp_path, container_workflow("- {id: to_a, include: a.yaml}\n"), "b.yaml")

    assert problems(tmp_path / "a.yaml") == [
        f"{tmp_path / 'a.yaml'}:4: steps[0].include: the included workflow b.yaml is invalid "
        f"(1 problem, listed under {tmp_path / 'b.yaml'})",
        f"{tmp_path / 'b.yaml'}:4: steps[0].include: include cycle: a.yaml -> b.yaml -> a.yaml",
    ]


def test_it_limits_includes_to_five_levels(tmp_path):
    for level in range(6):
        write(tmp_path, container_workflow(f"- {{id: down, include: level{level + 1}.yaml}}\n"), f"level{level}.yaml")
    write(tmp_path, container_workflow("- {id: leaf, agent: a1}\n"), "level6.yaml")
    chain = " -> ".join(f"level{n}.yaml" for n in range(7))

    found = problems(tmp_path / "level0.yaml")

    assert found[-1] == f"{tmp_path / 'level5.yaml'}:4: steps[0].include: includes nest at most 5 deep: {chain}"
    assert len(found) == 6  # and each including file says its include is invalid
    assert validate_workflow(tmp_path / "level1.yaml") == []


def test_it_reports_problems_of_an_included_file_under_its_own_path(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, "name: sub\nagents: {b1: {}}\nsteps:\n  - {id: one, agent: nobody}\n", "sub/bad.yaml")
    path = write(tmp_path, container_workflow("- {id: staging, include: sub/bad.yaml}\n"))

    assert problems(path) == [
        f"{path}:4: steps[0].include: the included workflow sub/bad.yaml is invalid "
        f"(1 problem, listed under {tmp_path / 'sub' / 'bad.yaml'})",
        f"{tmp_path / 'sub' / 'bad.yaml'}:4: steps[0].agent: unknown agent 'nobody'; defined agents: b1",
    ]


def test_it_checks_the_inputs_given_to_an_include(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, (CONTAINERS / "sub" / "staging.yaml").read_text(), "sub/staging.yaml")
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: staging
              include: sub/staging.yaml
              with: {taget: x}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:5: steps[0].include: sub/staging.yaml needs input 'target': give it under with",
        f"{path}:6: steps[0].with.taget: unknown input 'taget' of sub/staging.yaml (it takes: target)",
    ]


def test_it_rejects_an_included_agent_that_clashes(tmp_path):
    write(tmp_path, "name: sub\nagents: {a1: {system: other}}\nsteps:\n  - {id: one, agent: a1}\n", "sub.yaml")
    write(tmp_path, "name: same\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n", "same.yaml")
    path = write(
        tmp_path,
        container_workflow("- {id: clash, include: sub.yaml}\n- {id: shared, include: same.yaml}\n"),
    )

    assert problems(path) == [
        f"{path}:4: steps[0].include: agent 'a1' of sub.yaml differs from this workflow's agent 'a1'; "
        "rename one of them"
    ]


def test_it_counts_included_steps_towards_the_limit(tmp_path):
    steps = "".join(f"  - {{id: s{n}, agent: a1}}\n" for n in range(60))
    write(tmp_path, workflow(steps), "sub.yaml")
    path = write(tmp_path, workflow(steps + "  - {id: inc, include: sub.yaml}\n"))

    assert problems(path) == [
        f"{path}:3: steps: 120 steps once loops and includes are counted; a workflow has at most 100"
    ]


def test_it_needs_a_folder_to_include_from():
    with pytest.raises(WorkflowValidationError) as caught:
        parse_workflow(container_workflow("- {id: staging, include: sub/staging.yaml}\n"))

    assert str(caught.value) == (
        "<string>:4: steps[0].include: cannot include 'sub/staging.yaml': "
        "the workflow was not read from a file, so it has no folder"
    )


def test_it_includes_from_a_given_folder():
    text = (CONTAINERS / "include.yaml").read_text()

    spec = parse_workflow(text, "uploaded.yaml", base_dir=CONTAINERS)

    assert spec.step("staging").included.name == "staging"


def test_it_refuses_included_in_the_file(tmp_path):
    path = write(
        tmp_path,
        container_workflow("- id: staging\n  include: sub.yaml\n  included: {name: x}\n"),
    )
    write(tmp_path, "name: sub\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n", "sub.yaml")

    assert problems(path) == [
        f"{path}:6: steps[0].included: unknown field 'included': the loader fills it in from include"
    ]


def test_it_reports_container_problems_alongside_field_errors(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxConcurrency: 0
                steps:
                  - {id: draft, agent: ghost}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:5: steps[0].loop.maxIterations: required field missing: "
        "a repeat-until loop needs maxIterations (1 to 100)",
        f"{path}:6: steps[0].loop.maxConcurrency: Input should be greater than or equal to 1",
        f"{path}:8: steps[0].loop.steps[0].agent: unknown agent 'ghost'; defined agents: a1, judge",
    ]


def test_it_reserves_the_coordinator_step_id(tmp_path):
    path = tmp_path / "reserved.yaml"
    path.write_text("name: reserved\nagents: {a: {}}\nsteps:\n  - id: coordinator\n    agent: a\n")

    problems = validate_workflow(path)

    assert [str(p) for p in problems] == [
        f"{path}:4: steps[0].id: step id 'coordinator' is reserved for the run's coordinator"
    ]


def test_it_requires_steps_unless_the_coordinator_plans_them(tmp_path):
    empty = write(tmp_path, "name: flow\nagents: {a1: {}}\nsteps: []\n")
    planned = tmp_path / "planned.yaml"
    planned.write_text("name: flow\nagents: {coordinator: {tools: [spawn_worker]}, worker: {}}\nsteps: []\n")

    assert problems(empty) == [
        f"{empty}:3: steps: a workflow needs at least one step, unless its coordinator agent plans with spawn_worker"
    ]
    assert problems(planned) == []


def test_a_workflow_can_require_its_coordinator_to_plan_workers(tmp_path):
    planned = write(
        tmp_path,
        "name: flow\ncoordinator: {requireWorkers: true}\nagents: {coordinator: {tools: [spawn_worker]}}\nsteps: []\n",
    )
    unable = tmp_path / "unable.yaml"
    unable.write_text(
        "name: flow\ncoordinator: {requireWorkers: true}\nagents: {a1: {}}\nsteps: [{id: one, agent: a1}]\n"
    )

    assert load_workflow(planned).coordinator.require_workers
    assert problems(unable) == [
        f"{unable}:2: coordinator.requireWorkers: requireWorkers needs a coordinator agent that lists spawn_worker "
        "in its tools"
    ]
    assert not parse_workflow(
        "name: flow\nagents: {a1: {}}\nsteps: [{id: one, agent: a1}]\n"
    ).coordinator.require_workers


def test_the_research_brief_coordinator_must_plan_workers():
    spec = load_workflow(Path(__file__).parents[2] / "catalog" / "research_brief.yaml")

    assert spec.coordinator.require_workers


def test_it_rejects_a_tool_timeout_out_of_range_naming_the_tool(tmp_path):
    path = write(tmp_path, workflow("  - {id: one, agent: a1}\noptions: {toolTimeouts: {run_shell: 0}}\n"))

    [problem] = problems(path)
    assert problem.startswith(f"{path}:5: options.toolTimeouts.run_shell: ")
    assert "greater than 0" in problem


def test_text_from_a_client_cannot_reach_files_through_its_source_name():
    path = CONTAINERS / "include.yaml"
    text = path.read_text()

    # Named like a file on the server, but sent as text: no folder, no includes.
    with pytest.raises(WorkflowValidationError) as error:
        parse_workflow(text, str(path), from_file=False)
    assert "the workflow was not read from a file, so it has no folder" in str(error.value)
    # A name no file could have is just a name.
    with pytest.raises(WorkflowValidationError) as error:
        parse_workflow("name: x\n", "0" * 5000, from_file=True)
    assert "0" * 5000 in str(error.value)


def test_it_locates_an_input_type_that_is_not_a_name(tmp_path):
    path = tmp_path / "typed.yaml"
    path.write_text("name: typed\ninputs:\n  name:\n    type: []\nagents: {a1: {}}\nsteps: [{id: s, agent: a1}]\n")

    assert problems(path) == [
        f"{path}:4: inputs.name.type: Input should be 'string', 'integer', 'number', 'boolean' or 'path'"
    ]


def test_it_refuses_numbers_no_run_or_database_can_keep(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        version: 99999999999999999999999
        agents: {a1: {}}
        steps:
          - {id: s, agent: a1}
        options: {timeout: .inf, stepTimeout: 1e400, budget: {wallTime: .nan}}
        """,
    )

    assert problems(path) == [
        f"{path}:2: version: Input should be less than or equal to 2147483647",
        f"{path}:6: options.timeout: Input should be a finite number",
        f"{path}:6: options.stepTimeout: Input should be a finite number",
        f"{path}:6: options.budget.wallTime: Input should be a finite number",
    ]


def test_it_names_an_agent_whose_name_is_not_a_string(tmp_path):
    path = write(tmp_path, 'name: flow\nagents:\n  5: {}\nsteps:\n  - {id: s, agent: "5"}\n')

    found = problems(path)

    assert found[0] == f"{path}:3: agents[5]: invalid name: Input should be a valid string"
