"""Loop steps: repeat-until and forEach loops loaded, and what makes one
invalid (iterations, until, inputs, inner steps, nesting)."""

from __future__ import annotations

from agents.expansion import expand
from agents.handler.catalog import CatalogEntry
from agents.spec import load_workflow
from tests.runtime.workflow_texts import CONTAINERS, container_workflow, problems, write


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


def test_it_takes_until_together_with_until_agent(tmp_path):
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

    # zenflow's order: until is read first, then the judge is asked.
    assert problems(path) == []
    loop = load_workflow(path).steps[0].loop
    assert (loop.until, loop.until_agent) == ("DONE", "judge")


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
    write(tmp_path, "name: sub\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n", "sub.yaml")

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
        "its output ends the iteration",
        f"{path}:9: steps[0].loop.steps[0].loop: nested loop: a repeat-until loop inside a repeat-until loop "
        "is prohibited",
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


def test_it_reports_container_problems_alongside_field_errors(tmp_path):
    path = write(
        tmp_path,
        container_workflow(
            """\
            - id: refine
              loop:
                maxConcurrency: -1
                steps:
                  - {id: draft, agent: ghost}
            """
        ),
    )

    assert problems(path) == [
        f"{path}:5: steps[0].loop.maxIterations: required field missing: "
        "a repeat-until loop needs maxIterations (1 to 100)",
        f"{path}:6: steps[0].loop.maxConcurrency: Input should be greater than or equal to 0",
        f"{path}:8: steps[0].loop.steps[0].agent: unknown agent 'ghost'; defined agents: a1, judge",
    ]


def test_a_for_each_loop_may_give_its_own_list_of_at_most_100_items(tmp_path):
    # As zenflow writes it: forEach: [eu, us]. It was refused, and the loop
    # then read as a repeat-until loop missing its maxIterations.
    listed = write(
        tmp_path,
        container_workflow("- id: deploy\n  loop: {forEach: [eu, us, 3], steps: [{id: ship, agent: a1}]}\n"),
        "listed.yaml",
    )
    items = ", ".join(f"r{n}" for n in range(101))
    too_many = write(
        tmp_path,
        container_workflow(f"- id: deploy\n  loop: {{forEach: [{items}], steps: [{{id: ship, agent: a1}}]}}\n"),
        "too_many.yaml",
    )

    steps = expand(load_workflow(listed), {})
    assert [(s.runtime_id, s.variables["item"]) for s in steps] == [
        ("deploy[0].ship", "eu"),
        ("deploy[1].ship", "us"),
        ("deploy[2].ship", "3"),
    ]
    assert problems(too_many) == [f"{too_many}:5: steps[0].loop.forEach: forEach gives 101 items; at most 100"]


def test_a_catalog_entry_of_a_workflow_whose_for_each_gives_its_own_list_takes_no_list_input(tmp_path):
    path = write(
        tmp_path,
        container_workflow("- id: deploy\n  loop: {forEach: [eu, us], steps: [{id: ship, agent: a1}]}\n"),
    )

    assert CatalogEntry.of(load_workflow(path)).list_inputs == frozenset()
