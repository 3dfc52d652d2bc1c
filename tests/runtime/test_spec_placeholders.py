"""A ``$name`` in instructions that nothing substitutes is refused when the
workflow is validated, alongside its other problems; a stored version
still loads."""

from __future__ import annotations

import textwrap

from agents.spec import WorkflowSpec, parse_workflow
from tests.runtime.run_time_checks import ROLES, problems

# -- $name in instructions that nothing substitutes -----------------------------


def test_it_rejects_a_placeholder_that_is_neither_an_input_nor_a_variable(tmp_path):
    text = """\
        name: flow
        inputs:
          topic: {type: string}
        agents: {a1: {description: a1 agent}}
        steps:
          - id: one
            agent: a1
            instructions: Research $topik for $step.
        """

    assert problems(tmp_path, text) == [
        "8: steps[0].instructions: '$topik' is neither an input nor a variable zenweb provides here "
        "(did you mean '$topic'?); instructions here may use $inbox, $step, $topic (write $$ for a literal $)"
    ]


def test_dollars_that_are_not_placeholders_are_left_alone(tmp_path):
    text = """\
        name: flow
        inputs:
          topic: {type: string}
        agents: {a1: {description: a1 agent}}
        steps:
          - id: one
            agent: a1
            instructions: |
              Find ${topic} under $1000 (or $$500 each), read $inbox,
              and run `echo $HOME $PATH` in the shell. It costs $ 5.
        """

    assert problems(tmp_path, text) == []


def test_it_rejects_an_unknown_placeholder_in_the_coordinator_s_system_prompt(tmp_path):
    text = """\
        name: flow
        inputs:
          topic: {type: string}
        agents:
          coordinator:
            description: coordinator agent
            system: Coordinate research on $topik ($$5 budget, $HOME as is).
          a1: {description: a1 agent}
        steps:
          - {id: one, agent: a1, instructions: Research $topic.}
        """

    assert problems(tmp_path, text) == [
        "7: agents.coordinator.system: '$topik' is not an input of this workflow (did you mean '$topic'?); "
        "the coordinator's system prompt is rendered with the run's inputs only: it may use $topic "
        "(write $$ for a literal $)"
    ]
    fixed = text.replace("$topik", "$topic")
    assert problems(tmp_path, fixed) == []


def test_loop_variables_are_placeholders_only_inside_their_loop(tmp_path):
    text = """\
        name: flow
        inputs:
          regions: {type: string}
        agents: {a1: {description: a1 agent}}
        steps:
          - id: each
            loop:
              forEach: regions
              steps:
                - {id: ship, agent: a1, instructions: "Ship to $item ($index of $regions)."}
                - id: polish
                  loop:
                    maxIterations: 2
                    steps:
                      - {id: draft, agent: a1, instructions: "Draft $iteration for $item: $previous_output"}
          - {id: report, agent: a1, instructions: "Report on $item.", dependsOn: [each]}
        """

    assert problems(tmp_path, text) == [
        "16: steps[1].instructions: '$item' is neither an input nor a variable zenweb provides here "
        "(it is set only inside a forEach loop); instructions here may use $inbox, $regions, $step "
        "(write $$ for a literal $)"
    ]


def test_an_included_workflow_may_use_its_own_inputs_and_the_root_workflows(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "stage.yaml").write_text(
        textwrap.dedent(
            """\
            name: stage
            inputs:
              target: {type: string, required: true}
            agents: {builder: {description: builder agent}}
            steps:
              - {id: build, agent: builder, instructions: "Build $target in $region, not $zone."}
            """
        )
    )
    text = """\
        name: flow
        inputs:
          region: {type: string, default: eu}
        agents: {builder: {description: builder agent}}
        steps:
          - {id: staging, include: sub/stage.yaml, with: {target: "$region-1"}}
        """

    assert problems(tmp_path, text) == [
        "6: steps[0].include: the included workflow sub/stage.yaml is invalid (1 problem, listed under "
        f"{tmp_path}/sub/stage.yaml)",
        f"{tmp_path}/sub/stage.yaml:6: steps[0].instructions: '$zone' is neither an input nor a variable zenweb "
        "provides here; instructions here may use $inbox, $region, $step, $target (write $$ for a literal $)",
    ]


# -- every check, alongside the others ----------------------------------------------


def test_it_reports_these_problems_with_the_field_errors_of_the_same_file(tmp_path):
    text = """\
        name: flow
        version: 0
        agents:
          a1:
            description: a1 agent
            tools: [spawn_worker]
            script:
              - calls:
                  - {tool: [not, a, name]}
                  - {tool: search}
        steps:
          - {id: one, agent: a1, instructions: "About $topic."}
        options:
          toolTimeouts: {search: 5}
        """

    assert problems(tmp_path, text, ROLES) == [
        "2: version: Input should be greater than or equal to 1",
        "6: agents.a1.tools[0]: tool 'spawn_worker' is only available to the coordinator "
        "(the agent named 'coordinator'), and agent 'a1' runs steps",
        "9: agents.a1.script[0].calls[0].tool: Input should be a valid string",
        "10: agents.a1.script[0].calls[1].tool: script turn 1 calls 'search', which agent 'a1' does not list "
        "in tools (its tools: spawn_worker; every step also has send_message)",
        "12: steps[0].instructions: '$topic' is neither an input nor a variable zenweb provides here; "
        "instructions here may use $inbox, $step (write $$ for a literal $)",
        "14: options.toolTimeouts.search: no agent lists tool 'search', so this timeout applies to no call; "
        "the agents' tools: spawn_worker",
    ]


def test_a_stored_version_still_loads_when_a_newer_rule_would_refuse_it():
    spec = parse_workflow("name: flow\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n")
    data = spec.to_data()
    data["steps"][0]["instructions"] = "About $topic."
    data["options"]["toolTimeouts"] = {"search": 5}

    # Registered before these checks existed; its runs must still read it.
    assert WorkflowSpec.model_validate(data).steps[0].instructions == "About $topic."
