"""zenflow's v1 workflow files load, and are refused for the reasons
zenflow refuses them: one workflow per kind of valid file, one per class
of error zenflow names (its error tag in each case's id)."""

from __future__ import annotations

import textwrap

import pytest

from agents.expansion import expand
from agents.spec import DEFAULT_AGENT, load_workflow, not_run_refusal, workflow_warnings
from tests.runtime.workflow_texts import problems, write

JUDGE = "{description: Decides., resultSchema: {properties: {done: {type: boolean}}, required: [done]}}"

VALID = {
    "minimal": "name: hello\nsteps:\n  - {id: greet, instructions: Say hello}\n",
    "simple-chain": (
        "name: chain\nsteps:\n  - {id: build, instructions: Build}\n"
        "  - {id: test, instructions: Test, dependsOn: [build]}\n"
        "  - {id: ship, instructions: Ship, dependsOn: [test]}\n"
    ),
    "parallel": (
        "name: fan\nagents:\n  a: {description: Designs.}\n  b: {description: Builds.}\nsteps:\n"
        "  - {id: design, agent: a}\n  - {id: front, agent: b, dependsOn: [design]}\n"
        "  - {id: back, agent: b, dependsOn: [design]}\n  - {id: review, agent: a, dependsOn: [front, back]}\n"
    ),
    "all-options": (
        "name: opts\nsteps:\n  - {id: work, instructions: Work}\noptions:\n  maxConcurrency: 8\n"
        "  onStepFailure: skip-dependents\n  timeout: 1h30m\n  stepTimeout: 10m\n  isolation: none\n"
        "  scheduler: least-busy\n"
    ),
    "condition": (
        "name: gate\nsteps:\n  - {id: tests, instructions: Test}\n"
        "  - {id: deploy, instructions: Deploy, dependsOn: [tests], condition: \"steps.tests.status == 'completed'\"}\n"
    ),
    "condition-with-loop": (
        "name: fix\nsteps:\n  - {id: check, instructions: Check}\n  - id: repair\n    instructions: Repair\n"
        "    dependsOn: [check]\n    condition: \"steps.check.content.contains('unhealthy')\"\n"
        "    loop: {maxIterations: 5, until: \"content.contains('healthy')\", delay: 30s}\n"
    ),
    "full-featured": (
        f"name: full\ndescription: Every field.\nversion: 1\nagents:\n"
        "  coder: {description: Codes., prompt: You code., model: gpt-4o, tools: [read_file], "
        "disallowedTools: [run_shell], maxTurns: 10, temperature: 0.7, topP: 0.9}\n"
        f"  judge: {JUDGE}\nincludes:\n  deploy: sub/deploy.yaml\nsteps:\n"
        "  - {id: design, agent: coder, contextFiles: [docs/req.md], timeout: 30m}\n"
        "  - {id: build, agent: coder, dependsOn: [design], model: gpt-4.1, retries: 2, maxRetries: 1, "
        "condition: \"steps.design.status == 'completed'\"}\n"
        "  - id: cycle\n    dependsOn: [build]\n    loop:\n      maxIterations: 3\n      untilAgent: judge\n"
        "      steps: [{id: review, agent: coder}]\n"
        "  - {id: ship, include: deploy, dependsOn: [cycle], timeout: 15m, retries: 1}\n"
        "options: {maxConcurrency: 4, onStepFailure: skip-dependents, timeout: 2h, isolation: worktree-per-step, "
        "scheduler: dependency-first, maxRetries: 1}\n"
    ),
    "include-inline-path": (
        "name: inc\nsteps:\n  - {id: setup, instructions: Set up}\n  - {id: auth, include: sub/auth.yaml}\n"
    ),
    "include-named": "name: inc\nincludes: {auth: sub/auth.yaml}\nsteps:\n  - {id: auth, include: auth}\n",
    "include-with-dependson": (
        "name: inc\nincludes: {build: sub/build.yaml}\nsteps:\n  - {id: compile, instructions: Compile}\n"
        "  - {id: run-build, include: build, dependsOn: [compile]}\n"
    ),
    "include-with-timeout": (
        "name: inc\nincludes: {d: sub/d.yaml}\nsteps:\n  - {id: d, include: d, timeout: 15m, retries: 3}\n"
    ),
    "loop-foreach-static": (
        "name: each\nsteps:\n  - id: review\n    instructions: Review $item\n"
        "    loop: {forEach: [alpha, {repo: beta}], maxConcurrency: 3}\n"
    ),
    "loop-foreach": (
        "name: each\nsteps:\n  - {id: list, instructions: List}\n  - id: deploy\n    dependsOn: [list]\n"
        "    loop: {forEach: \"steps['list'].result.services\", maxConcurrency: 3}\n"
    ),
    "loop-output-mode": "name: rounds\nsteps:\n  - id: r\n    loop: {maxIterations: 3, outputMode: cumulative}\n",
    "loop-repeat-until": (
        "name: cycle\nsteps:\n  - id: cycle\n    loop:\n      maxIterations: 5\n"
        "      until: \"steps.fix.content.contains('LGTM')\"\n      delay: 10s\n"
        "      steps: [{id: review, instructions: Review}, {id: fix, instructions: Fix, dependsOn: [review]}]\n"
    ),
    "loop-untilagent": (
        f"name: debate\nagents:\n  judge: {JUDGE}\nsteps:\n  - id: debate\n    loop:\n      maxIterations: 5\n"
        "      untilAgent: judge\n      steps: [{id: pro, instructions: Argue}, {id: verdict, agent: judge, "
        "dependsOn: [pro]}]\n"
    ),
    "retries-and-sampling": (
        "name: sampling\nagents:\n  drafter: {description: Drafts., temperature: 0.9, topP: 0.95}\n"
        "options: {maxRetries: 1}\nsteps:\n  - {id: draft, agent: drafter, maxRetries: 3}\n"
    ),
    "step-contextfiles": (
        "name: ctx\nsteps:\n  - {id: review, instructions: Review, contextFiles: [docs/a.md, .lint.yml]}\n"
    ),
    "step-model-override": (
        "name: models\nagents:\n  writer: {description: Writes., model: gpt-4o}\nsteps:\n"
        "  - {id: draft, agent: writer}\n  - {id: refine, agent: writer, dependsOn: [draft], model: gpt-4.1}\n"
    ),
    "step-retries": "name: resilient\nsteps:\n  - {id: deploy, instructions: Deploy, retries: 3, timeout: 10m}\n",
}


@pytest.mark.parametrize("case", sorted(VALID))
def test_it_accepts_a_valid_zenflow_file(tmp_path, case):
    path = write(tmp_path, VALID[case])

    assert problems(path) == []
    assert load_workflow(path).version == 1


# Each zenflow error class: a file, and where and what zenweb says.
INVALID = {
    "missing_name": ("steps:\n  - {id: a, instructions: A}\n", "1: name: required field missing"),
    "missing_steps": ("name: w\n", "1: steps: a workflow needs at least one step"),
    "empty_steps": ("name: w\nsteps: []\n", "2: steps: a workflow needs at least one step"),
    "invalid_step_id": ("name: w\nsteps:\n  - {id: 1-a, instructions: A}\n", "3: steps[0].id: invalid name '1-a'"),
    "agent_missing_description": (
        "name: w\nagents:\n  a: {}\n  b: {}\nsteps:\n  - {id: s, agent: a}\n",
        "3: agents.a.description: required field missing",
    ),
    "negative_value": (
        "name: w\nsteps:\n  - {id: s, loop: {maxIterations: 0, until: \"content == 'x'\"}}\n",
        "3: steps[0].loop.maxIterations: Input should be greater than or equal to 1",
    ),
    "duplicate_step": ("name: w\nsteps:\n  - {id: a}\n  - {id: a}\n", "4: steps[1].id: duplicate step id 'a'"),
    "missing_agent": ("name: w\nsteps:\n  - {id: a, agent: ghost}\n", "3: steps[0].agent: unknown agent 'ghost'"),
    "missing_dep": ("name: w\nsteps:\n  - {id: a, dependsOn: [b, c]}\n", "3: steps[0].dependsOn[0]: unknown step 'b'"),
    "cycle": ("name: w\nsteps:\n  - {id: a, dependsOn: [b]}\n  - {id: b, dependsOn: [a]}\n", "dependency cycle"),
    "include_has_agent": ("name: w\nsteps:\n  - {id: a, include: x.yaml, agent: a}\n", "steps[0].agent: an include"),
    "include_has_instructions": ("name: w\nsteps:\n  - {id: a, include: x.yaml, instructions: Go}\n", "instructions"),
    "include_has_loop": ("name: w\nsteps:\n  - {id: a, include: x.yaml, loop: {forEach: [a]}}\n", "loop or include"),
    "include_has_condition": ("name: w\nsteps:\n  - {id: a, include: x.yaml, condition: 'true'}\n", "no condition"),
    "include_has_contextfiles": (
        "name: w\nsteps:\n  - {id: a, include: x.yaml, contextFiles: [a.md]}\n",
        "no contextFiles",
    ),
    "include_has_model": ("name: w\nsteps:\n  - {id: a, include: x.yaml, model: gpt-4o}\n", "has no model"),
    "loop_missing_max_iterations": (
        "name: w\nsteps:\n  - {id: a, loop: {until: \"content == 'x'\"}}\n",
        "steps[0].loop.maxIterations: required field missing",
    ),
    "foreach_with_max_iterations": (
        "name: w\nsteps:\n  - {id: a, loop: {forEach: [x], maxIterations: 2}}\n",
        "maxIterations",
    ),
    "foreach_with_until": (
        "name: w\nsteps:\n  - {id: a, loop: {forEach: [x], until: 'true'}}\n",
        "loop.until: until belongs",
    ),
    "foreach_with_untilagent": (
        f"name: w\nagents:\n  j: {JUDGE}\nsteps:\n  - {{id: a, loop: {{forEach: [x], untilAgent: j}}}}\n",
        "untilAgent belongs to repeat-until loops",
    ),
    "foreach_with_delay": ("name: w\nsteps:\n  - {id: a, loop: {forEach: [x], delay: 5s}}\n", "delay belongs"),
    "foreach_empty_array": ("name: w\nsteps:\n  - {id: a, loop: {forEach: []}}\n", "forEach gives no items"),
    "untilagent_bad_ref": (
        "name: w\nsteps:\n  - {id: a, loop: {maxIterations: 2, untilAgent: judge}}\n",
        "untilAgent: unknown agent 'judge'",
    ),
    "nested_loop_prohibited": (
        "name: w\nsteps:\n  - id: a\n    loop:\n      maxIterations: 2\n"
        "      steps: [{id: b, loop: {maxIterations: 2}}, {id: c, dependsOn: [b]}]\n",
        "nested loop: a repeat-until loop inside a repeat-until loop is prohibited",
    ),
    "unknown_version": ("name: w\nversion: 2\nsteps:\n  - {id: a}\n", "2: version: unknown version 2"),
    "loop_validation": ("name: w\nsteps:\n  - {id: a, loop: {maxIterations: 2, outputMode: wrong}}\n", "outputMode"),
    "validation (a judge without a done)": (
        "name: w\nagents:\n  j: {description: Judges.}\nsteps:\n  - {id: a, loop: {maxIterations: 2, untilAgent: j}}\n",
        "the judge 'j' needs a resultSchema with a required boolean done",
    ),
    "validation (a CEL syntax error)": (
        'name: w\nsteps:\n  - id: a\n    condition: "steps.b.status =="\n',
        "4: steps[0].condition: CEL syntax error at column",
    ),
    "validation (out of range)": (
        "name: w\nagents:\n  a: {description: A., topP: 2, maxTurns: -1}\n"
        "options: {scheduler: fastest}\nsteps:\n  - {id: s}\n",
        "3: agents.a.maxTurns: Input should be greater than or equal to 0",
    ),
}


@pytest.mark.parametrize("error", sorted(INVALID))
def test_it_refuses_an_invalid_zenflow_file_for_zenflow_s_reason(tmp_path, error):
    text, expected = INVALID[error]
    path = write(tmp_path, text)

    found = problems(path)

    assert any(expected in problem for problem in found), found


def test_every_agent_without_a_description_is_named():
    text = INVALID["agent_missing_description"][0]

    assert problems_of(text) == [
        "w.yaml:3: agents.a.description: required field missing: say what the agent is for",
        "w.yaml:4: agents.b.description: required field missing: say what the agent is for",
    ]


def test_a_step_without_an_agent_runs_as_the_default_agent_and_a_loop_without_steps_runs_its_step(tmp_path):
    spec = load_workflow(write(tmp_path, VALID["loop-output-mode"]))

    (inner,) = spec.steps[0].loop.steps
    assert (inner.id, inner.agent) == ("r", DEFAULT_AGENT)
    assert spec.agents[DEFAULT_AGENT].description
    assert spec.steps[0].loop.output_mode == "cumulative"


def test_an_until_of_text_stays_zenweb_s_and_an_until_of_cel_runs_without_a_warning(tmp_path):
    text = VALID["condition-with-loop"]
    spec = load_workflow(write(tmp_path, text))

    # The loop's delay and its own condition run.
    assert workflow_warnings(spec, text, "w.yaml") == []
    assert not_run_refusal(spec, text, "w.yaml") is None


def test_a_file_zenweb_runs_in_full_has_no_warning(tmp_path):
    for case in (
        "minimal",
        "simple-chain",
        "parallel",
        "loop-foreach-static",
        "loop-untilagent",
        "step-model-override",
        "step-retries",  # a step's retries, and its own timeout
        "retries-and-sampling",  # maxRetries of a step and of the workflow
        "loop-repeat-until",  # a CEL until and a delay
    ):
        spec = load_workflow(write(tmp_path, VALID[case], f"{case}.yaml"))
        assert workflow_warnings(spec, VALID[case], case) == [], case
        assert not_run_refusal(spec, VALID[case], case) is None


def test_a_prompt_is_the_system_prompt_and_may_name_a_file_in_the_folder(tmp_path):
    (tmp_path / "flow" / "prompts").mkdir(parents=True)
    write(tmp_path, "Be brief.\n", "flow/prompts/brief.md")
    write(tmp_path, "secret\n", "outside.md")
    text = textwrap.dedent(
        """\
        name: prompts
        agents:
          a: {description: A., prompt: "@prompts/brief.md"}
          b: {description: B., prompt: "@../outside.md"}
          c: {description: C., prompt: You code.}
        steps:
          - {id: s, agent: a}
        """
    )
    path = write(tmp_path, text, "flow/prompts.yaml")

    spec = load_workflow(path)

    assert (spec.agents["a"].system, spec.agents["b"].system, spec.agents["c"].system) == (
        "Be brief.\n",
        "@../outside.md",
        "You code.",
    )
    assert [w.field for w in workflow_warnings(spec, text, "w.yaml")] == ["agents.b.prompt"]


def problems_of(text: str) -> list[str]:
    from agents.spec import WorkflowValidationError, parse_workflow

    try:
        parse_workflow(text, "w.yaml")
    except WorkflowValidationError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_context_files_are_read_from_the_workflow_s_folder_only_and_put_after_the_instructions(tmp_path):
    (tmp_path / "flow" / "docs").mkdir(parents=True)
    write(tmp_path, "Use $HOME and $item as they are.\n" + "x" * 9000, "flow/docs/guide.md")
    write(tmp_path, "secret\n", "outside.md")
    text = "name: ctx\nsteps:\n  - {id: s, instructions: Go, contextFiles: [docs/guide.md, ../outside.md, none.md]}\n"
    path = write(tmp_path, text, "flow/ctx.yaml")

    spec = load_workflow(path)
    (step,) = expand(spec, {})

    assert list(spec.steps[0].context_file_texts) == ["docs/guide.md"]
    assert step.instructions.startswith("Go\n\n## Context file docs/guide.md\nUse $$HOME and $$item as they are.")
    assert step.instructions.endswith("x...[truncated for context limit]")
    assert [str(w) for w in workflow_warnings(spec, text, "w.yaml")] == [
        "w.yaml:3: steps[0].contextFiles: warning: accepted; not run by zenweb yet: "
        "contextFiles not found in the workflow's folder: ../outside.md, none.md"
    ]


def test_zenflow_s_tools_are_zenweb_s_tools_that_do_their_work(tmp_path):
    text = "name: tools\nagents:\n  a: {description: A., tools: [bash, read, write, glob, grep], "
    text += "disallowedTools: [write]}\n"
    spec = load_workflow(write(tmp_path, text + "steps:\n  - {id: s, agent: a}\n"))

    assert spec.agents["a"].tools == ["run_shell", "read_file", "write_file", "glob", "grep"]
    assert spec.agents["a"].tool_names == ["run_shell", "read_file", "glob", "grep"]
