"""Tools a workflow could only fail to call at run time are refused when it
is validated: a tool its agent's role can never call, a script calling a
tool its agent lacks, and a tool timeout or approval for no tool."""

from __future__ import annotations

from tests.runtime.run_time_checks import ROLES, problems

# -- a tool the agent's role can never call --------------------------------------


def test_it_rejects_a_coordinator_tool_on_an_agent_that_runs_steps(tmp_path):
    text = """\
        name: flow
        agents:
          writer:
            description: writer agent
            tools:
              - read_file
              - finalize
        steps:
          - {id: one, agent: writer}
        """

    assert problems(tmp_path, text, ROLES) == [
        "7: agents.writer.tools[1]: tool 'finalize' is only available to the coordinator "
        "(the agent named 'coordinator'), and agent 'writer' runs steps"
    ]


def test_it_rejects_a_step_tool_on_the_coordinator(tmp_path):
    text = """\
        name: flow
        mcp: [docs]
        agents:
          coordinator:
            description: coordinator agent
            tools: [spawn_worker, run_shell, docs__delete, docs__lookup]
          worker: {description: worker agent}
        steps: []
        """

    assert problems(tmp_path, text, ROLES) == [
        "6: agents.coordinator.tools[1]: tool 'run_shell' is only available to steps, and agent 'coordinator' "
        "is the run's coordinator; list it on an agent that runs steps",
        "6: agents.coordinator.tools[2]: tool 'docs__delete' is only available to steps, and agent 'coordinator' "
        "is the run's coordinator; list it on an agent that runs steps",
    ]


def test_it_rejects_a_tool_of_an_mcp_server_the_workflow_does_not_name(tmp_path):
    # A run gets the tools of the servers its workflow names in mcp:, no
    # others: a coordinator granting a worker tools cannot reach past them.
    text = """\
        name: flow
        agents:
          worker:
            description: worker agent
            tools: [docs__lookup, docs__delete]
        approvals: [docs__delete]
        steps:
          - {id: one, agent: worker}
        """

    assert problems(tmp_path, text, ROLES) == [
        "5: agents.worker.tools[0]: 'docs__lookup' is a tool of MCP server 'docs', which this workflow does not "
        "name: add it to mcp:",
        "5: agents.worker.tools[1]: 'docs__delete' is a tool of MCP server 'docs', which this workflow does not "
        "name: add it to mcp:",
        "6: approvals[0]: 'docs__delete' is a tool of MCP server 'docs', which this workflow does not name: "
        "add it to mcp:",
    ]


def test_workers_run_as_steps_and_a_coordinator_that_runs_a_step_may_list_step_tools(tmp_path):
    # The coordinator spawns workers of any other agent, used by a step or not.
    workers = """\
        name: flow
        agents:
          coordinator: {description: coordinator agent, tools: [spawn_worker, narrate]}
          worker: {description: worker agent, tools: [run_shell, send_message]}
          spare: {description: spare agent, tools: [read_file]}
        steps: []
        """
    # A step named after the coordinator's agent runs it as a step.
    both = """\
        name: flow
        agents:
          coordinator: {description: coordinator agent, tools: [run_shell, narrate]}
        steps:
          - {id: one, agent: coordinator}
        """

    assert problems(tmp_path, workers, ROLES) == []
    assert problems(tmp_path, both, ROLES) == []


def test_it_checks_roles_only_when_it_is_given_them(tmp_path):
    text = """\
        name: flow
        agents:
          writer: {description: writer agent, tools: [finalize]}
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
          coordinator: {description: coordinator agent, tools: [docs__delete]}
          a1: {description: a1 agent}
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
            description: x agent
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
        "10: agents.x.script[1].calls[1].tool: script turn 2 calls 'search', which agent 'x' does not list "
        "in tools (its tools: read_file; every step also has send_message)"
    ]


def test_the_coordinators_script_may_call_its_own_tools_without_listing_them(tmp_path):
    text = """\
        name: flow
        agents:
          coordinator:
            description: coordinator agent
            script:
              - calls: [{tool: narrate, args: {text: hi}}, {tool: finalize, args: {summary: ok}}]
              - calls: [{tool: spawn_worker, args: {task: more}}]
          a1: {description: a1 agent}
        steps:
          - {id: one, agent: a1}
        """

    assert problems(tmp_path, text) == [
        "7: agents.coordinator.script[1].calls[0].tool: script turn 2 calls 'spawn_worker', which agent "
        "'coordinator' does not list in tools (its tools: none; the coordinator also has finalize, "
        "forward_to_agent, narrate)"
    ]


def test_a_worker_may_call_tools_the_coordinator_gives_it_but_a_step_may_not(tmp_path):
    planned = """\
        name: flow
        agents:
          coordinator:
            description: coordinator agent
            tools: [spawn_worker]
            script:
              - calls: [{tool: spawn_worker, args: {task: look, agent: researcher, tools: [search]}}]
          researcher:
            description: researcher agent
            script:
              - calls: [{tool: search, args: {query: laptops}}]
        steps: []
        """
    # The same agent also runs a step, which never gets more than it lists.
    also_a_step = planned.replace("steps: []", "steps:\n          - {id: one, agent: researcher}")

    assert problems(tmp_path, planned) == []
    assert problems(tmp_path, also_a_step) == [
        "11: agents.researcher.script[0].calls[0].tool: script turn 1 calls 'search', which agent 'researcher' "
        "does not list in tools (its tools: none; every step also has send_message)"
    ]


def test_the_script_of_an_agent_on_a_real_model_is_not_checked(tmp_path):
    text = """\
        name: flow
        agents:
          x:
            description: x agent
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
          a1: {description: a1 agent, tools: [run_shell, read_file]}
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
          a1: {description: a1 agent, tools: [run_shell, read_file]}
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
          coordinator: {description: coordinator agent, tools: [spawn_worker]}
          worker: {description: worker agent}
        steps: []
        options:
          toolTimeouts: {run_shell: 60, run_shel: 30}
        """

    assert problems(tmp_path, text) == []
    assert problems(tmp_path, text, ROLES) == [
        "7: options.toolTimeouts.run_shel: unknown tool 'run_shel' (did you mean 'run_shell'?)"
    ]
