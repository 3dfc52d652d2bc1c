"""Include steps: an included workflow loaded and its agents merged, and
includes refused (out of the folder, missing, cyclic, too deep, clashing)."""

from __future__ import annotations

import pytest

from agents.spec import (
    WorkflowValidationError,
    load_workflow,
    not_run_refusal,
    parse_workflow,
    validate_workflow,
    workflow_warnings,
)
from tests.runtime.workflow_texts import CONTAINERS, container_workflow, problems, workflow, write


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


def test_it_rejects_an_include_that_leaves_the_folder(tmp_path):
    (tmp_path / "flows").mkdir()
    write(
        tmp_path, "name: outside\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n", "x.yaml"
    )
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
    write(
        tmp_path, "name: outside\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n", "x.yaml"
    )
    (tmp_path / "flows" / "link.yaml").symlink_to(tmp_path / "x.yaml")
    path = write(tmp_path, container_workflow("- {id: linked, include: link.yaml}\n"), "flows/flow.yaml")

    assert problems(path) == [f"{path}:4: steps[0].include: include path 'link.yaml' leaves this workflow's folder"]


def test_a_missing_include_file_is_a_warning_and_refuses_a_run_naming_step_and_line(tmp_path):
    # zenflow resolves includes when it runs: the file validates, but no run starts.
    path = write(tmp_path, workflow("  - {id: staging, include: sub/staging.yaml}\n"))

    spec = load_workflow(path)

    assert problems(path) == []
    assert [str(w) for w in workflow_warnings(spec, path.read_text(), str(path))] == [
        f"{path}:4: steps[0].include: warning: accepted; not run by zenweb yet: "
        "the included file sub/staging.yaml was not found"
    ]
    assert not_run_refusal(spec, path.read_text(), "flow.yaml") == (
        "flow.yaml uses what zenweb does not run yet, so no run starts: "
        "steps[0].include (step staging, line 4): the included file sub/staging.yaml was not found"
    )


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
    write(
        tmp_path,
        "name: sub\nagents: {b1: {description: b1 agent}}\nsteps:\n  - {id: one, agent: nobody}\n",
        "sub/bad.yaml",
    )
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
    write(
        tmp_path,
        "name: sub\nagents: {a1: {description: a1 agent, system: other}}\nsteps:\n  - {id: one, agent: a1}\n",
        "sub.yaml",
    )
    write(
        tmp_path, "name: same\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n", "same.yaml"
    )
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
    write(tmp_path, "name: sub\nagents: {a1: {description: a1 agent}}\nsteps:\n  - {id: one, agent: a1}\n", "sub.yaml")

    assert problems(path) == [
        f"{path}:6: steps[0].included: unknown field 'included': the loader fills it in from include"
    ]


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


def test_it_refuses_an_include_whose_approval_gate_the_including_workflow_would_drop(tmp_path):
    # A run asks for approval by its own workflow's settings: a destructive
    # file included by a plain workflow would run with nobody asked.
    write(
        tmp_path,
        "name: wipe\ndestructive: true\napprovals: [run_shell]\napproval: {approvers: 2}\n"
        "agents: {janitor: {description: janitor agent, tools: [run_shell]}}\n"
        "steps:\n  - {id: clean, agent: janitor}\n",
        "wipe.yaml",
    )
    plain = write(tmp_path, container_workflow("- {id: inner, include: wipe.yaml}\n"), "plain.yaml")
    gated = write(
        tmp_path,
        "name: gated\ndestructive: true\napprovals: [run_shell]\napproval: {approvers: 2}\n"
        "agents: {a1: {description: a1 agent}}\n"
        "steps:\n  - {id: inner, include: wipe.yaml}\n",
        "gated.yaml",
    )

    assert problems(plain) == [
        f"{plain}:4: steps[0].include: wipe.yaml is destructive: mark this workflow destructive: true too",
        f"{plain}:4: steps[0].include: wipe.yaml has each run_shell call approved: list it in approvals: here too",
        f"{plain}:4: steps[0].include: wipe.yaml needs 2 approvers: set approval: {{approvers: 2}} here too",
    ]
    spec = load_workflow(gated)
    assert (spec.destructive, spec.approvals, spec.step("inner").included.name) == (True, ["run_shell"], "wipe")
