from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agents import expansion as scheduler
from agents.core.ready import past_cap, ready
from agents.expansion import ExpansionError, expand
from agents.llm.base import CompletionRequest
from agents.llm.scripted import ScriptedProvider
from agents.repeat_loops import Finished, judge_decision, next_iteration
from agents.spec import load_workflow, parse_workflow

ROOT = Path(__file__).parent.parent.parent
CONTAINERS = ROOT / "tests" / "workflows" / "containers"


def fixture(name):
    return load_workflow(CONTAINERS / f"{name}.yaml")


def shape(steps):
    return [(step.runtime_id, step.depends_on) for step in steps]


def test_it_expands_iteration_0_of_a_repeat_until_loop():
    steps = expand(fixture("loop"), {"topic": "tides"})

    assert shape(steps) == [
        ("research", ()),
        ("refine.0.draft", ("research",)),
        ("refine.0.review", ("refine.0.draft",)),
        # The last iteration is not known in advance: publish waits for the loop itself.
        ("publish", ("refine",)),
    ]
    draft = steps[1]
    assert (draft.agent, draft.container, draft.iteration, draft.kind) == ("writer", "refine", 0, "step")
    assert draft.instructions == "Draft round 0 on $topic."
    assert draft.variables == {"iteration": "0"}
    assert draft.previous_output is None
    assert (steps[0].container, steps[0].iteration, steps[0].group) == ("", None, "")


def test_it_expands_every_for_each_iteration_from_a_comma_string():
    steps = expand(fixture("foreach"), {"regions": " eu, us ,, asia"})

    assert shape(steps) == [
        ("plan", ()),
        ("deploy[0].ship", ("plan",)),
        ("deploy[0].verify", ("deploy[0].ship",)),
        ("deploy[1].ship", ("plan",)),
        ("deploy[1].verify", ("deploy[1].ship",)),
        ("deploy[2].ship", ("plan",)),
        ("deploy[2].verify", ("deploy[2].ship",)),
        ("report", ("deploy[0].verify", "deploy[1].verify", "deploy[2].verify")),
    ]
    ship = steps[3]
    assert ship.instructions == "Ship to us (number 1)."
    assert (ship.container, ship.iteration, ship.group, ship.max_concurrency) == ("deploy", 1, "deploy", 2)
    assert ship.variables == {"item": "us", "index": "1"}


def test_it_expands_for_each_from_a_list_or_a_json_list():
    from_list = expand(fixture("foreach"), {"regions": ["eu", "us"]})
    from_json = expand(fixture("foreach"), {"regions": '["eu", "us"]'})

    assert shape(from_list) == shape(from_json)
    assert [s.instructions for s in from_json if s.runtime_id.endswith("ship")] == [
        "Ship to eu (number 0).",
        "Ship to us (number 1).",
    ]


def test_it_uses_the_input_default_for_for_each():
    steps = expand(fixture("foreach"), {})

    assert [s.runtime_id for s in steps if s.runtime_id.endswith("ship")] == ["deploy[0].ship", "deploy[1].ship"]


def test_it_lets_dependents_of_an_empty_for_each_wait_for_what_it_waited_for():
    steps = expand(fixture("foreach"), {"regions": ""})

    assert shape(steps) == [("plan", ()), ("report", ("plan",))]


def test_it_refuses_a_for_each_input_that_is_not_a_list():
    with pytest.raises(ExpansionError, match="not a valid JSON list"):
        expand(fixture("foreach"), {"regions": "[eu"})
    with pytest.raises(ExpansionError, match="has 101 items; at most 100"):
        expand(fixture("foreach"), {"regions": ",".join(f"r{n}" for n in range(101))})


def items(n):
    return ",".join(f"x{i}" for i in range(n))


def test_it_expands_nested_loops_up_to_the_most_steps_a_run_may_have():
    steps = expand(fixture("nested"), {"xs": items(10)})

    assert len(steps) == scheduler.MAX_RUN_STEPS == 1000
    assert steps[-1].runtime_id == "outer[9].mid[9].inner[9].work"


def test_it_refuses_nested_loops_that_expand_past_the_most_steps_a_run_may_have():
    # 11 x 11 x 11 steps: the outer loop passes 1,000 at its ninth item.
    with pytest.raises(ExpansionError, match=r"^forEach loop 'outer' expands to more than 1,000 steps; a run has at"):
        expand(fixture("nested"), {"xs": items(11)})
    # 100 x 100 x 100 would be a million: the first middle loop already
    # passes the limit, and expansion stops there.
    with pytest.raises(ExpansionError, match=r"^forEach loop 'outer\[0\]\.mid' expands to more than 1,000"):
        expand(fixture("nested"), {"xs": items(100)})


def test_a_finished_loop_gives_its_dependents_its_last_or_every_iterations_output():
    outputs = {"refine.0.review": "tighten the intro", "refine.1.review": "better", "refine.2.review": "APPROVED"}
    last = next_iteration(fixture("loop"), "refine", 2, outputs)
    spec = fixture("loop")
    spec.step("refine").loop.output_mode = "cumulative"
    cumulative = next_iteration(spec, "refine", 2, outputs)

    assert (last.action, last.reason, last.output) == ("done", "refine.2.review said 'APPROVED'", "APPROVED")
    assert (
        cumulative.output == "## Iteration 0\ntighten the intro\n\n## Iteration 1\nbetter\n\n## Iteration 2\nAPPROVED"
    )


def test_it_fails_a_repeat_until_iteration_that_would_take_the_run_past_its_most_steps():
    outputs = {"refine.0.review": "tighten the intro"}

    assert next_iteration(fixture("loop"), "refine", 0, outputs, run_steps=998).action == "more"
    refused = next_iteration(fixture("loop"), "refine", 0, outputs, run_steps=999)
    assert (refused.action, refused.steps) == ("fail", ())
    assert refused.reason == "iteration 1 would add 2 steps to the run's 999; a run has at most 1,000"


def test_it_expands_an_include_under_its_namespace():
    steps = expand(fixture("include"), {"env": "prod"})

    assert shape(steps) == [
        ("staging.build", ()),
        ("staging.test", ("staging.build",)),
        ("announce", ("staging.test",)),
    ]
    build = steps[0]
    assert (build.agent, build.container, build.iteration) == ("builder", "staging", None)
    # with: {target: "$env-1"}, from this run's env input.
    assert build.instructions == "Build prod-1."
    assert build.variables == {"target": "prod-1"}


def test_it_passes_container_dependencies_to_the_first_inner_steps(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "staging.yaml").write_text((CONTAINERS / "sub" / "staging.yaml").read_text())
    path = tmp_path / "flow.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: flow
            inputs: {regions: {default: "eu,us"}}
            agents: {a1: {description: a1 agent}}
            steps:
              - {id: first, agent: a1}
              - id: staging
                include: sub/staging.yaml
                with: {target: "$regions"}
                dependsOn: [first]
              - id: deploy
                dependsOn: [staging]
                loop:
                  forEach: regions
                  steps:
                    - id: refine
                      loop:
                        maxIterations: 2
                        steps: [{id: draft, agent: a1, instructions: "$item, round $iteration"}]
              - {id: last, agent: a1, dependsOn: [deploy]}
            """
        )
    )
    spec = load_workflow(path)

    steps = expand(spec, {})

    assert shape(steps) == [
        ("first", ()),
        ("staging.build", ("first",)),
        ("staging.test", ("staging.build",)),
        ("deploy[0].refine.0.draft", ("staging.test",)),
        ("deploy[1].refine.0.draft", ("staging.test",)),
        ("last", ("deploy[0].refine", "deploy[1].refine")),
    ]
    assert steps[4].instructions == "us, round 0"
    assert steps[4].limits == (("deploy", 5),)
    assert scheduler.final_ids(spec, "deploy", {}) == ("deploy[0].refine", "deploy[1].refine")
    assert scheduler.final_ids(spec, "staging", {}) == ("staging.test",)

    decision = next_iteration(spec, "deploy[1].refine", 0, {"deploy[1].refine.0.draft": "draft us"})

    assert decision.action == "more"
    assert shape(decision.steps) == [("deploy[1].refine.1.draft", ("staging.test",))]
    assert decision.steps[0].instructions == "us, round 1\n\nOutput of the previous iteration:\ndraft us"


def test_it_ends_a_loop_when_the_last_step_says_the_until_text():
    decision = next_iteration(fixture("loop"), "refine", 0, {"refine.0.review": "Looks good. APPROVED"})

    assert decision.action == "done"
    assert decision.reason == "refine.0.review said 'APPROVED'"


def test_it_matches_the_until_text_case_sensitively_in_the_last_step_only():
    outputs = {"refine.0.draft": "APPROVED", "refine.0.review": "approved"}

    assert next_iteration(fixture("loop"), "refine", 0, outputs).action == "more"


def test_a_loop_whose_until_never_held_fails_after_max_iterations_as_zenflows_does():
    decision = next_iteration(fixture("loop"), "refine", 2, {"refine.2.review": "still rough"})

    assert decision.action == "fail"
    assert decision.reason == "loop exhausted 3 iterations: until condition never became true"


def test_a_loop_without_until_or_judge_completes_after_max_iterations():
    spec = fixture("loop")
    spec.step("refine").loop.until = None

    decision = next_iteration(spec, "refine", 2, {"refine.2.review": "still rough"})

    assert (decision.action, decision.reason) == ("done", "maxIterations (3) reached")


def test_a_cel_until_ends_the_loop_reading_the_iterations_steps():
    spec = fixture("loop")
    spec.step("refine").loop.until = "steps.draft.content.contains('v2') && iteration == 1"
    outputs = {"refine.1.draft": "draft v2", "refine.1.review": "fine"}

    done = next_iteration(spec, "refine", 1, outputs)
    more = next_iteration(spec, "refine", 0, {"refine.0.draft": "draft v2", "refine.0.review": "fine"})

    assert (done.action, done.output) == ("done", "fine")
    assert done.reason == "until \"steps.draft.content.contains('v2') && iteration == 1\" held"
    assert more.action == "more"


def test_a_cel_until_reads_a_step_its_condition_skipped_as_skipped():
    spec = fixture("loop")
    spec.step("refine").loop.until = "steps.review.status == 'skipped' && status == 'completed'"
    outputs = {"refine.0.draft": "draft v2", "refine.0.review": ""}

    skipped = next_iteration(spec, "refine", 0, Finished(outputs, {"refine.0.review": "skipped"}))
    reviewed = next_iteration(spec, "refine", 0, Finished(outputs, {"refine.0.review": "completed"}))

    assert skipped.action == "done"
    assert reviewed.action == "more"


def test_a_cel_until_that_fails_to_evaluate_fails_the_loop():
    spec = fixture("loop")
    spec.step("refine").loop.until = "content + 1 == 2"

    decision = next_iteration(spec, "refine", 0, {"refine.0.review": "fine"})

    assert decision.action == "fail"
    assert decision.reason.startswith("loop until eval (iteration 1): CEL expression 'content + 1 == 2' failed")


def test_it_starts_the_next_iteration_with_the_previous_output():
    decision = next_iteration(fixture("loop"), "refine", 0, {"refine.0.review": "tighten the intro"})

    assert decision.action == "more"
    assert shape(decision.steps) == [
        ("refine.1.draft", ("research",)),
        ("refine.1.review", ("refine.1.draft",)),
    ]
    draft, review = decision.steps
    assert draft.iteration == 1
    assert draft.previous_output == review.previous_output == "tighten the intro"
    assert draft.instructions == "Draft round 1 on $topic.\n\nOutput of the previous iteration:\ntighten the intro"
    assert review.instructions == "Review the draft."
    assert draft.variables == {"iteration": "1", "previous_output": "tighten the intro"}


def test_it_clips_a_long_previous_output():
    decision = next_iteration(fixture("loop"), "refine", 0, {"refine.0.review": "x" * 9000})

    assert decision.steps[0].previous_output == "x" * 8192 + "...[truncated for context limit]"


def test_it_asks_the_judge_and_follows_its_verdict():
    spec = fixture("judged")
    outputs = {"polish.0.draft": "a better text"}

    asked = next_iteration(spec, "polish", 0, outputs)
    done = next_iteration(spec, "polish", 0, outputs, verdict=judge_decision("Yes, it reads well."))
    more = next_iteration(spec, "polish", 0, outputs, verdict=judge_decision("No: the ending is weak."))

    assert (asked.action, asked.agent) == ("judge", "judge")
    assert "a better text" in asked.prompt
    assert '"done" is true when the loop is done' in asked.prompt  # the judge has a resultSchema
    assert (done.action, done.reason) == ("done", "judge judged iteration 0 done")
    assert more.action == "more"
    assert [s.runtime_id for s in more.steps] == ["polish.1.draft"]


def test_a_judge_decides_with_its_submit_result_call_before_its_text():
    assert judge_decision("", [("submit_result", '{"done": true}')]) is True
    assert judge_decision("Yes!", [("submit_result", '{"done": false, "reason": "weak"}')]) is False
    # A call of another tool, or a result without a boolean done, leaves the text to decide.
    assert judge_decision("yes", [("grep", '{"done": false}'), ("submit_result", '{"done": "no"}')]) is True


def test_a_judge_with_a_result_schema_decides_with_its_done():
    assert judge_decision('{"done": true, "reason": "it reads well"}') is True
    assert judge_decision('```json\n{"done": false, "reason": "weak ending"}\n```') is False
    # Anything else is read by its first word, as before.
    assert judge_decision('{"reason": "no done"}') is False
    assert judge_decision("Done.") is True


def test_it_asks_the_judge_after_the_last_iteration_too_and_fails_the_loop_without_its_yes():
    spec = fixture("judged")

    asked = next_iteration(spec, "polish", 3, {})
    exhausted = next_iteration(spec, "polish", 3, {}, verdict=False)
    done = next_iteration(spec, "polish", 3, {}, verdict=True)

    assert asked.action == "judge"
    assert (exhausted.action, exhausted.reason) == (
        "fail",
        "loop exhausted 4 iterations: judge agent never returned done",
    )
    assert done.action == "done"


@pytest.mark.parametrize(
    ("answer", "done"),
    [
        ("yes", True),
        ("Yes, it reads well.", True),
        ("TRUE", True),
        ("done.", True),
        ("**Approved**", True),
        ("no", False),
        ("not done yet", False),
        ("", False),
        ("maybe yes", False),
    ],
)
def test_it_reads_a_judges_answer(answer, done):
    assert judge_decision(answer) is done


def test_it_refuses_next_iteration_for_something_that_is_not_a_repeat_loop():
    with pytest.raises(ValueError, match="not a repeat-until loop"):
        next_iteration(fixture("foreach"), "deploy", 0, {})
    with pytest.raises(ValueError, match="no step 'ghost'"):
        next_iteration(fixture("loop"), "ghost", 0, {})


def test_it_continues_a_loop_inside_an_include(tmp_path):
    (tmp_path / "sub.yaml").write_text(
        "name: sub\ninputs: {who: {}}\nagents: {a1: {description: a1 agent}}\nsteps:\n"
        "  - id: polish\n    loop:\n      maxIterations: 3\n      until: OK\n"
        "      steps: [{id: draft, agent: a1, instructions: 'for $who'}]\n"
    )
    (tmp_path / "flow.yaml").write_text(
        "name: flow\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: start, agent: a1}\n"
        "  - {id: inc, include: sub.yaml, with: {who: me}, dependsOn: [start]}\n"
    )
    spec = load_workflow(tmp_path / "flow.yaml")

    assert shape(expand(spec, {})) == [("start", ()), ("inc.polish.0.draft", ("start",))]
    assert scheduler.container_kinds(spec) == {"inc": "include", "inc.polish": "loop", "polish": "loop"}
    decision = next_iteration(spec, "inc.polish", 0, {"inc.polish.0.draft": "not yet"})

    assert shape(decision.steps) == [("inc.polish.1.draft", ("start",))]
    assert decision.steps[0].instructions.startswith("for me\n\n")


def test_it_lists_container_ids_for_the_router():
    spec = parse_workflow(
        textwrap.dedent(
            """\
            name: flow
            inputs: {items: {}}
            agents: {a1: {description: a1 agent}}
            steps:
              - id: outer
                loop:
                  maxIterations: 2
                  steps:
                    - id: inner
                      loop: {forEach: items, steps: [{id: x, agent: a1}]}
                    - {id: last, agent: a1, dependsOn: [inner]}
            """
        )
    )

    assert scheduler.container_ids(spec) == {"outer", "inner"}
    assert scheduler.container_kinds(spec) == {"outer": "loop", "inner": "loop"}


def test_a_step_past_its_loops_cap_is_told_by_its_iteration_number():
    # foreach.yaml: two regions at a time; the third region's steps are past the cap.
    steps = {s.runtime_id: s for s in expand(fixture("foreach"), {"regions": "eu,us,asia"})}

    assert [past_cap(r, s.limits) for r, s in steps.items() if s.limits] == [False, False, False, False, True, True]
    assert not past_cap("report", steps["report"].limits)
    # Nested loops: past the inner loop's cap of 2, within the outer one's of 5.
    assert past_cap("a[1].b[2].x", [["a", 5], ["a[1].b", 2]])
    assert not past_cap("a[1].b[1].x", [["a", 5], ["a[1].b", 2]])


def test_it_lists_the_kinds_of_loop_a_workflow_has():
    assert scheduler.loop_kinds(fixture("foreach")) == {"forEach"}
    assert scheduler.loop_kinds(fixture("loop")) == {"repeat"}
    assert (
        scheduler.loop_kinds(parse_workflow("name: w\nsteps: [{id: a, agent: x}]\nagents: {x: {description: x agent}}"))
        == set()
    )


def test_it_starts_ready_steps_within_the_for_each_cap():
    steps = expand(fixture("foreach"), {"regions": "eu,us,asia"})
    status = {"plan": "completed"}

    first = ready(steps, status, max_running=5)

    assert [s.runtime_id for s in first] == ["deploy[0].ship", "deploy[1].ship"]
    status.update({"deploy[0].ship": "completed", "deploy[1].ship": "running"})
    # deploy[0] is under way, so its next step may start; deploy[2] waits for a free slot.
    assert [s.runtime_id for s in ready(steps, status, max_running=5)] == ["deploy[0].verify"]
    status.update({"deploy[0].verify": "completed"})
    assert [s.runtime_id for s in ready(steps, status, max_running=5)] == ["deploy[2].ship"]


def test_it_starts_no_more_than_the_run_allows():
    steps = expand(fixture("foreach"), {"regions": "eu,us,asia"})

    assert ready(steps, {"plan": "completed"}, max_running=1) == [steps[1]]
    assert ready(steps, {"plan": "running"}, max_running=5) == []


def test_it_waits_for_a_repeat_loop_to_be_marked_done():
    steps = expand(fixture("loop"), {})
    status = {"research": "completed", "refine.0.draft": "completed", "refine.0.review": "completed"}

    assert ready(steps, status, max_running=5) == []
    assert [s.runtime_id for s in ready(steps, {**status, "refine": "completed"}, max_running=5)] == ["publish"]


def play(spec, step):
    """The output of a runtime step whose agent is scripted, as the runner would ask for it."""
    script = [turn.model_copy(update={"delay": 0}) for turn in spec.agents[step.agent].script]
    request = CompletionRequest(
        agent=step.agent,
        messages=[{"role": "user", "content": step.instructions}],
        variables={"topic": "the dashboard", **step.variables},
    )
    return ScriptedProvider(script).complete(request).content


def test_it_approves_the_catalog_loop_on_its_second_iteration():
    spec = load_workflow(ROOT / "runs" / "catalog" / "loop_review.yaml")
    steps = [s for s in expand(spec, {}) if s.container == "refine"]
    iterations = []

    for n in range(3):
        outputs = {s.runtime_id: play(spec, s) for s in steps}
        decision = next_iteration(spec, "refine", n, outputs)
        iterations.append(outputs[f"refine.{n}.review"])
        if decision.action == "done":
            break
        steps = list(decision.steps)

    assert iterations == [
        "Reviewed draft 0. Drafts APPROVED so far: 0",
        "Reviewed draft 1. Drafts APPROVED so far: 1",
    ]
    assert decision.reason == "refine.1.review said 'APPROVED so far: 1'"


def test_it_ships_the_catalog_regions_two_at_a_time():
    spec = load_workflow(ROOT / "runs" / "catalog" / "regions_foreach.yaml")
    steps = expand(spec, {})

    assert shape(steps) == [
        ("deploy[0].ship", ()),
        ("deploy[1].ship", ()),
        ("deploy[2].ship", ()),
        ("summary", ("deploy[0].ship", "deploy[1].ship", "deploy[2].ship")),
    ]
    assert [s.runtime_id for s in ready(steps, {}, max_running=5)] == ["deploy[0].ship", "deploy[1].ship"]
    assert steps[2].instructions == "Ship the release to asia and tell the coordinator when you start."


def test_it_refuses_runtime_ids_longer_than_the_store_takes():
    long_id = "l" + "x" * 63
    steps = f"  - {{id: {long_id}, agent: a1}}\n"
    for level in range(3):
        steps = f"  - id: c{level}{'y' * 62}\n    loop:\n      forEach: items\n      steps:\n" + textwrap.indent(
            steps, "      "
        )
    spec = parse_workflow(
        f"name: flow\ninputs: {{items: {{}}}}\nagents: {{a1: {{description: a1 agent}}}}\nsteps:\n{steps}"
    )

    with pytest.raises(ExpansionError, match="longer than 200 characters"):
        expand(spec, {"items": "a"})
