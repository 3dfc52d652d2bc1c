"""Fields a workflow gets wrong, each reported with its file, line and path:
unknown fields, bad names, limits, missing fields and values out of range."""

from __future__ import annotations

from agents.spec import DEFAULT_AGENT, load_workflow
from tests.runtime.workflow_texts import problems, workflow, write


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
            f"{path}:5: options.colour: unknown field 'colour' (allowed: budget, holdTimeout, isolation, "
            "maxConcurrency, maxConsecutiveToolFailures, maxEmptyAnswerRetries, maxMailboxSize, maxRetries, "
            "maxRunToolCalls, maxToolCalls, maxTurns, maxWakeCycles, maxWorkers, onStepFailure, sandbox, scheduler, "
            "stepMaxWakeCycles, stepTimeout, timeout, toolExecution, toolTimeout, toolTimeouts, workerAgent)"
        )
    ]


def test_it_rejects_a_step_id_that_breaks_the_pattern(tmp_path):
    path = write(tmp_path, workflow("  - id: Write Draft\n    agent: a1\n"))

    assert problems(path) == [
        (
            f"{path}:4: steps[0].id: invalid name 'Write Draft': use letters, "
            "digits, '_' and '-', starting with a letter, at most 64 characters"
        )
    ]


def test_it_rejects_more_than_100_steps(tmp_path):
    steps = "".join(f"  - {{id: s{n}, agent: a1}}\n" for n in range(101))
    path = write(tmp_path, workflow(steps))

    assert problems(path) == [f"{path}:3: steps: List should have at most 100 items, not 101"]


def test_it_rejects_a_description_over_2000_characters(tmp_path):
    text = workflow("  - {id: one, agent: a1}\n") + f"description: {'x' * 2001}\n"
    path = write(tmp_path, text)

    assert problems(path) == [f"{path}:5: description: String should have at most 2000 characters"]


def test_it_reports_a_missing_required_field_at_its_parent(tmp_path):
    path = write(tmp_path, workflow("  - agent: a1\n    instructions: hi\n"))

    assert problems(path) == [f"{path}:4: steps[0].id: required field missing"]


def test_a_step_that_names_no_agent_runs_as_the_default_agent(tmp_path):
    path = write(tmp_path, workflow("  - id: one\n    instructions: hi\n"))

    spec = load_workflow(path)

    assert spec.step("one").agent == DEFAULT_AGENT
    assert spec.agents[DEFAULT_AGENT].description


def test_it_rejects_a_script_turn_with_both_say_and_calls(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1:
            description: a1 agent
            script:
              - say: hello
                calls: [{tool: send_message}]
        steps:
          - {id: one, agent: a1}
        """,
    )

    assert problems(path) == [
        (f"{path}:6: agents.a1.script[0]: a script turn needs exactly one of say, calls, fail (found say and calls)")
    ]


def test_it_rejects_an_unknown_tool_when_the_known_tools_are_given(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1:
            description: a1 agent
            tools:
              - send_message
              - search_web
        steps:
          - {id: one, agent: a1}
        """,
    )

    assert problems(path) == []
    assert problems(path, known_tools={"send_message", "narrate"}) == [
        (f"{path}:7: agents.a1.tools[1]: unknown tool 'search_web'; known tools: narrate, send_message")
    ]


def test_it_reports_every_field_error_at_once_sorted_by_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        version: 0
        agents:
          a1: {description: a1 agent, temperature: 3}
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


def test_it_rejects_a_tool_timeout_out_of_range_naming_the_tool(tmp_path):
    path = write(tmp_path, workflow("  - {id: one, agent: a1}\noptions: {toolTimeouts: {run_shell: 0}}\n"))

    [problem] = problems(path)
    assert problem.startswith(f"{path}:5: options.toolTimeouts.run_shell: ")
    assert "greater than 0" in problem


def test_it_locates_an_input_type_that_is_not_a_name(tmp_path):
    path = tmp_path / "typed.yaml"
    path.write_text(
        "name: typed\ninputs:\n  name:\n    type: []\n"
        "agents: {a1: {description: a1 agent}}\nsteps: [{id: s, agent: a1}]\n"
    )

    assert problems(path) == [
        f"{path}:4: inputs.name.type: Input should be 'string', 'integer', 'number', 'boolean' or 'path'"
    ]


def test_it_refuses_numbers_no_run_or_database_can_keep(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        version: 99999999999999999999999
        agents: {a1: {description: a1 agent}}
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


def test_it_takes_timeouts_in_seconds_or_as_durations_and_says_what_it_could_not_read(tmp_path):
    # zenflow writes timeouts as Go durations (10m, 1h30m); a number is seconds.
    good = write(
        tmp_path,
        workflow(
            "  - {id: one, agent: a1}\n"
            "options: {timeout: 1h30m, stepTimeout: '90', toolTimeouts: {glob: 500ms}}\n"
            "approval: {expiresAfter: 2h}\n",
            agents="agents: {a1: {description: a1 agent, tools: [glob]}}",
        ),
        "good.yaml",
    )
    bad = write(tmp_path, workflow("  - {id: one, agent: a1}\noptions: {timeout: 5d, stepTimeout: 0s}\n"), "bad.yaml")

    spec = load_workflow(good)
    assert (spec.options.timeout, spec.options.step_timeout, spec.options.tool_timeouts) == (5400, 90, {"glob": 0.5})
    assert spec.approval.expires_after == 7200
    assert problems(bad) == [
        f"{bad}:5: options.timeout: expected seconds (a number) or a duration such as 90s, 10m or 1h30m, got '5d'",
        f"{bad}:5: options.stepTimeout: Input should be greater than 0",
    ]


def test_a_step_may_name_its_own_model_and_a_container_may_not(tmp_path):
    path = write(
        tmp_path,
        workflow(
            "  - {id: one, agent: a1, model: small-model}\n"
            "  - id: loop\n    model: big-model\n    loop: {maxIterations: 2, steps: [{id: two, agent: a1}]}\n"
        ),
    )

    assert problems(path) == [
        f"{path}:6: steps[1].model: a loop step has no model; its inner steps or their agents name theirs"
    ]
