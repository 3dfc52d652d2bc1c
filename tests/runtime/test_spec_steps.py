"""Steps and what they name: unknown agents and dependencies, cycles,
duplicate ids, and the steps a coordinator may plan instead."""

from __future__ import annotations

from pathlib import Path

from agents.spec import load_workflow, parse_workflow, validate_workflow
from tests.runtime.workflow_texts import problems, workflow, write


def test_it_rejects_an_unknown_agent_listing_the_defined_ones(tmp_path):
    path = write(
        tmp_path,
        workflow(
            "  - id: one\n    agent: ghost\n",
            agents="agents: {zed: {description: zed agent}, amy: {description: amy agent}}",
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


def test_it_reports_every_problem_at_once_sorted_by_line(tmp_path):
    path = write(
        tmp_path,
        """\
        name: flow
        agents:
          a1: {description: a1 agent}
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


def test_it_reserves_the_coordinator_step_id(tmp_path):
    path = tmp_path / "reserved.yaml"
    path.write_text("name: reserved\nagents: {a: {description: a agent}}\nsteps:\n  - id: coordinator\n    agent: a\n")

    problems = validate_workflow(path)

    assert [str(p) for p in problems] == [
        f"{path}:4: steps[0].id: step id 'coordinator' is reserved for the run's coordinator"
    ]


def test_it_requires_steps_unless_the_coordinator_plans_them(tmp_path):
    empty = write(tmp_path, "name: flow\nagents: {a1: {description: a1 agent}}\nsteps: []\n")
    planned = tmp_path / "planned.yaml"
    planned.write_text(
        "name: flow\n"
        "agents:\n"
        "  coordinator: {description: coordinator agent, tools: [spawn_worker]}\n"
        "  worker: {description: worker agent}\n"
        "steps: []\n"
    )

    assert problems(empty) == [
        f"{empty}:3: steps: a workflow needs at least one step, unless its coordinator agent plans with spawn_worker"
    ]
    assert problems(planned) == []


def test_a_workflow_can_require_its_coordinator_to_plan_workers(tmp_path):
    planned = write(
        tmp_path,
        "name: flow\ncoordinator: {requireWorkers: true}\n"
        "agents: {coordinator: {description: coordinator agent, tools: [spawn_worker]}}\nsteps: []\n",
    )
    unable = tmp_path / "unable.yaml"
    unable.write_text(
        "name: flow\ncoordinator: {requireWorkers: true}\n"
        "agents: {a1: {description: a1 agent}}\nsteps: [{id: one, agent: a1}]\n"
    )

    assert load_workflow(planned).coordinator.require_workers
    assert problems(unable) == [
        f"{unable}:2: coordinator.requireWorkers: requireWorkers needs a coordinator agent that lists spawn_worker "
        "in its tools"
    ]
    assert not parse_workflow(
        "name: flow\nagents: {a1: {description: a1 agent}}\nsteps: [{id: one, agent: a1}]\n"
    ).coordinator.require_workers


def test_the_research_brief_coordinator_must_plan_workers():
    spec = load_workflow(Path(__file__).parents[2] / "runs" / "catalog" / "research_brief.yaml")

    assert spec.coordinator.require_workers
