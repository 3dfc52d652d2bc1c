"""Workflows that could only fail at run time are refused when validated, each
problem with its file, line and field: a tool its agent's role can never
call, a script calling a tool its agent lacks, a tool timeout for no tool,
and a ``$name`` in instructions that nothing substitutes."""

from __future__ import annotations

import textwrap

from agents.spec import WorkflowSpec, parse_workflow, validate_workflow

# Tool name -> the roles that may call it, as the catalog passes them.
ROLES = {
    "send_message": {"step"},
    "run_shell": {"step"},
    "read_file": {"coordinator", "step"},
    "search": {"coordinator", "step"},
    "spawn_worker": {"coordinator"},
    "finalize": {"coordinator"},
    "narrate": {"coordinator"},
    "forward_to_agent": {"coordinator"},
    "docs__lookup": {"coordinator", "step"},  # a read-only MCP tool
    "docs__delete": {"step"},  # one that changes things
}


def problems(tmp_path, text, known_tools=None):
    path = tmp_path / "flow.yaml"
    path.write_text(textwrap.dedent(text))
    return [str(problem).removeprefix(f"{path}:") for problem in validate_workflow(path, known_tools)]


# -- a tool the agent's role can never call --------------------------------------


def test_it_rejects_a_coordinator_tool_on_an_agent_that_runs_steps(tmp_path):
    text = """\
        name: flow
        agents:
          writer:
            tools:
              - read_file
              - finalize
        steps:
          - {id: one, agent: writer}
        """

    assert problems(tmp_path, text, ROLES) == [
        "6: agents.writer.tools[1]: tool 'finalize' is only available to the coordinator "
        "(the agent named 'coordinator'), and agent 'writer' runs steps"
    ]


def test_it_rejects_a_step_tool_on_the_coordinator(tmp_path):
    text = """\
        name: flow
        agents:
          coordinator:
            tools: [spawn_worker, run_shell, docs__delete, docs__lookup]
          worker: {}
        steps: []
        """

    assert problems(tmp_path, text, ROLES) == [
        "4: agents.coordinator.tools[1]: tool 'run_shell' is only available to steps, and agent 'coordinator' "
        "is the run's coordinator; list it on an agent that runs steps",
        "4: agents.coordinator.tools[2]: tool 'docs__delete' is only available to steps, and agent 'coordinator' "
        "is the run's coordinator; list it on an agent that runs steps",
    ]


def test_workers_run_as_steps_and_a_coordinator_that_runs_a_step_may_list_step_tools(tmp_path):
    # The coordinator spawns workers of any other agent, used by a step or not.
    workers = """\
        name: flow
        agents:
          coordinator: {tools: [spawn_worker, narrate]}
          worker: {tools: [run_shell, send_message]}
          spare: {tools: [read_file]}
        steps: []
        """
    # A step named after the coordinator's agent runs it as a step.
    both = """\
        name: flow
        agents:
          coordinator: {tools: [run_shell, narrate]}
        steps:
          - {id: one, agent: coordinator}
        """

    assert problems(tmp_path, workers, ROLES) == []
    assert problems(tmp_path, both, ROLES) == []


def test_it_checks_roles_only_when_it_is_given_them(tmp_path):
    text = """\
        name: flow
        agents:
          writer: {tools: [finalize]}
        steps:
          - {id: one, agent: writer}
        """

    assert problems(tmp_path, text) == []
    assert problems(tmp_path, text, set(ROLES)) == []


def test_the_tools_of_a_server_the_workflow_names_are_checked_against_the_configured_one(tmp_path):
    text = """\
        name: flow
        mcp: [docs]
        agents:
          coordinator: {tools: [docs__delete]}
          a1: {}
        steps:
          - {id: one, agent: a1}
        """

    # A workflow names the operator's server; it cannot bring its own of that name.
    [problem] = problems(tmp_path, text, ROLES)
    assert problem.startswith("4: agents.coordinator.tools[0]: tool 'docs__delete' is only available to steps")


# -- a script calling a tool its agent does not have -----------------------------


def test_it_rejects_a_script_call_of_a_tool_the_agent_does_not_list_at_the_call(tmp_path):
    text = """\
        name: flow
        agents:
          x:
            tools: [read_file]
            script:
              - calls: [{tool: read_file, args: {path: notes.md}}]
              - calls:
                  - {tool: send_message, args: {text: hi}}
                  - {tool: search, args: {query: laptops}}
              - say: done
        steps:
          - {id: one, agent: x}
        """

    assert problems(tmp_path, text) == [
        "9: agents.x.script[1].calls[1].tool: script turn 2 calls 'search', which agent 'x' does not list "
        "in tools (its tools: read_file; every step also has send_message)"
    ]


def test_the_coordinators_script_may_call_its_own_tools_without_listing_them(tmp_path):
    text = """\
        name: flow
        agents:
          coordinator:
            script:
              - calls: [{tool: narrate, args: {text: hi}}, {tool: finalize, args: {summary: ok}}]
              - calls: [{tool: spawn_worker, args: {task: more}}]
          a1: {}
        steps:
          - {id: one, agent: a1}
        """

    assert problems(tmp_path, text) == [
        "6: agents.coordinator.script[1].calls[0].tool: script turn 2 calls 'spawn_worker', which agent "
        "'coordinator' does not list in tools (its tools: none; the coordinator also has finalize, "
        "forward_to_agent, narrate)"
    ]


def test_a_worker_may_call_tools_the_coordinator_gives_it_but_a_step_may_not(tmp_path):
    planned = """\
        name: flow
        agents:
          coordinator:
            tools: [spawn_worker]
            script:
              - calls: [{tool: spawn_worker, args: {task: look, agent: researcher, tools: [search]}}]
          researcher:
            script:
              - calls: [{tool: search, args: {query: laptops}}]
        steps: []
        """
    # The same agent also runs a step, which never gets more than it lists.
    also_a_step = planned.replace("steps: []", "steps:\n          - {id: one, agent: researcher}")

    assert problems(tmp_path, planned) == []
    assert problems(tmp_path, also_a_step) == [
        "9: agents.researcher.script[0].calls[0].tool: script turn 1 calls 'search', which agent 'researcher' "
        "does not list in tools (its tools: none; every step also has send_message)"
    ]


def test_the_script_of_an_agent_on_a_real_model_is_not_checked(tmp_path):
    text = """\
        name: flow
        agents:
          x:
            provider: openai
            script:
              - calls: [{tool: search, args: {query: laptops}}]
        steps:
          - {id: one, agent: x}
        """

    # Only the scripted provider plays a script.
    assert problems(tmp_path, text) == []


# -- a tool timeout for no tool ----------------------------------------------------


def test_it_rejects_a_tool_timeout_for_a_tool_no_agent_lists(tmp_path):
    text = """\
        name: flow
        agents:
          a1: {tools: [run_shell, read_file]}
        steps:
          - {id: one, agent: a1}
        options:
          toolTimeouts:
            run_shell: 60
            run_shel: 30
        """

    assert problems(tmp_path, text, ROLES) == [
        "9: options.toolTimeouts.run_shel: no agent lists tool 'run_shel', so this timeout applies to no call "
        "(did you mean 'run_shell'?); the agents' tools: read_file, run_shell"
    ]


def test_it_rejects_an_approval_for_a_tool_no_agent_lists(tmp_path):
    text = """\
        name: flow
        approvals: [run_shell, search]
        agents:
          a1: {tools: [run_shell, read_file]}
        steps:
          - {id: one, agent: a1}
        """

    assert problems(tmp_path, text, ROLES) == [
        "2: approvals[1]: no agent lists tool 'search', so this approval applies to no call; "
        "the agents' tools: read_file, run_shell"
    ]


def test_with_spawn_worker_a_tool_timeout_may_name_any_tool_a_worker_could_be_given(tmp_path):
    text = """\
        name: flow
        agents:
          coordinator: {tools: [spawn_worker]}
          worker: {}
        steps: []
        options:
          toolTimeouts: {run_shell: 60, run_shel: 30}
        """

    assert problems(tmp_path, text) == []
    assert problems(tmp_path, text, ROLES) == [
        "7: options.toolTimeouts.run_shel: unknown tool 'run_shel' (did you mean 'run_shell'?)"
    ]


# -- $name in instructions that nothing substitutes -----------------------------


def test_it_rejects_a_placeholder_that_is_neither_an_input_nor_a_variable(tmp_path):
    text = """\
        name: flow
        inputs:
          topic: {type: string}
        agents: {a1: {}}
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
        agents: {a1: {}}
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
            system: Coordinate research on $topik ($$5 budget, $HOME as is).
          a1: {}
        steps:
          - {id: one, agent: a1, instructions: Research $topic.}
        """

    assert problems(tmp_path, text) == [
        "6: agents.coordinator.system: '$topik' is not an input of this workflow (did you mean '$topic'?); "
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
        agents: {a1: {}}
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
            agents: {builder: {}}
            steps:
              - {id: build, agent: builder, instructions: "Build $target in $region, not $zone."}
            """
        )
    )
    text = """\
        name: flow
        inputs:
          region: {type: string, default: eu}
        agents: {builder: {}}
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
        "5: agents.a1.tools[0]: tool 'spawn_worker' is only available to the coordinator "
        "(the agent named 'coordinator'), and agent 'a1' runs steps",
        "8: agents.a1.script[0].calls[0].tool: Input should be a valid string",
        "9: agents.a1.script[0].calls[1].tool: script turn 1 calls 'search', which agent 'a1' does not list "
        "in tools (its tools: spawn_worker; every step also has send_message)",
        "11: steps[0].instructions: '$topic' is neither an input nor a variable zenweb provides here; "
        "instructions here may use $inbox, $step (write $$ for a literal $)",
        "13: options.toolTimeouts.search: no agent lists tool 'search', so this timeout applies to no call; "
        "the agents' tools: spawn_worker",
    ]


def test_a_stored_version_still_loads_when_a_newer_rule_would_refuse_it():
    spec = parse_workflow("name: flow\nagents: {a1: {}}\nsteps:\n  - {id: one, agent: a1}\n")
    data = spec.to_data()
    data["steps"][0]["instructions"] = "About $topic."
    data["options"]["toolTimeouts"] = {"search": 5}

    # Registered before these checks existed; its runs must still read it.
    assert WorkflowSpec.model_validate(data).steps[0].instructions == "About $topic."
