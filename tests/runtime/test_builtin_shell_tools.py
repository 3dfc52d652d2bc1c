"""The builtin shell toolset, driven through the registry: commands in the
workspace, their environment, time and output limits, destructive commands,
and what the coordinator may not change."""

from __future__ import annotations

import time

import pytest

from agents.tools.builtin.shell import destructive_reason
from tests.runtime.processes import processes_running
from tests.runtime.tool_agent import Agent, hint_of, result_of


@pytest.mark.sandbox
def test_it_runs_a_command_in_the_workspace_and_reports_its_exit_code(step, workspace):
    outcome = step.call("run_shell", {"command": "pwd; echo out; echo err >&2; touch made.txt; exit 3"})

    assert outcome.ok is True
    ran = result_of(outcome)["result"]
    assert ran["exit_code"] == 3
    assert ran["output"].splitlines() == [str(workspace.resolve()), "out", "err"]
    assert (workspace / "made.txt").exists()


@pytest.mark.sandbox
def test_it_does_not_pass_the_parent_environment_to_commands(step, workspace, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")

    outcome = step.call("run_shell", {"command": 'env; echo "key=[$OPENAI_API_KEY]"'})

    assert outcome.ok is True
    assert "sk-secret" not in outcome.text
    assert "OPENAI_API_KEY" not in outcome.text
    assert "key=[]" in outcome.text
    assert f"HOME={workspace.resolve()}" in outcome.text
    assert "TMPDIR=/tmp\n" in result_of(outcome)["result"]["output"]  # the sandbox's own, in memory


@pytest.mark.sandbox
def test_it_stops_a_command_that_runs_too_long_with_its_children(step, workspace):
    started = time.monotonic()

    outcome = step.call("run_shell", {"command": "sleep 30.25 & echo started; wait", "timeout": 1})

    assert time.monotonic() - started < 3
    assert outcome.ok is False
    assert outcome.error_kind == "timeout"
    assert "timed out after 1s" in outcome.text
    assert "started" in outcome.text
    assert hint_of(outcome)["missing_fields"] == ["timeout"]
    # Its pid inside the sandbox's PID namespace means nothing out here: look for its command line.
    assert processes_running("sleep 30.25") == []


@pytest.mark.sandbox
def test_it_caps_long_output_with_a_note(step):
    outcome = step.call("run_shell", {"command": "head -c 100000 /dev/zero | tr '\\0' x; echo; echo THE-END"})

    assert outcome.ok is True
    assert outcome.omitted is False
    assert len(outcome.text) <= 16_000
    ran = result_of(outcome)["result"]
    assert "[output truncated: 12000 of 100009 chars shown" in ran["output"]
    assert ran["exit_code"] == 0 and ran["output"].startswith("xxx")
    assert ran["output"].endswith("THE-END\n")


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf sub",
        "rm -r sub",
        "rm -fr sub",
        "RM -R sub",
        "rm --recursive sub",
        "ls && rm -v -rf sub",
        "ls | xargs rm -rf",
        "echo hi; git push --force origin main",
        "git push -f",
        "git push origin +main",
        "git reset --hard HEAD~1",
        "git clean -fdx",
        "mkfs.ext4 /dev/sdb1",
        "dd if=/dev/zero of=sub/disk.img",
        "chmod -R 777 sub",
        "chown -R nobody sub",
        "cat sub/x > /dev/sda",
        "sudo shutdown -h now",
        "true && reboot",
        ":(){ :|:& };:",
        "find sub -name '*.txt' -delete",
    ],
)
def test_it_refuses_destructive_commands_in_an_unapproved_run(step, workspace, command):
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x.txt").write_text("keep me")

    outcome = step.call("run_shell", {"command": command})

    assert outcome.ok is False
    assert outcome.error_kind == "domain_rejection"
    assert "not approved for destructive work" in outcome.text
    assert hint_of(outcome)["action"] == "replan"
    assert (workspace / "sub" / "x.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    "command",
    [
        "rm notes.txt",
        "rm -f notes.txt",
        "grep -rn reboot src",
        "git push origin main",
        "git clean -n",
        "chmod -r notes.txt",
        "echo hi > /dev/null",
        "find . -name '*.py'",
        "ls -lR",
    ],
)
def test_it_lets_ordinary_commands_through(command):
    assert destructive_reason(command) is None


@pytest.mark.sandbox
def test_it_runs_destructive_commands_in_an_approved_run(workspace):
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x.txt").write_text("scratch")

    outcome = Agent(workspace, destructive_approved=True).call("run_shell", {"command": "rm -rf sub"})

    assert outcome.ok is True
    assert result_of(outcome) == {"result": {"exit_code": 0, "output": ""}}
    assert not (workspace / "sub").exists()


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("write_file", {"path": "a.txt", "content": "hi"}),
        ("edit_file", {"path": "a.txt", "old": "hi", "new": "bye"}),
        ("run_shell", {"command": "touch a.txt"}),
    ],
)
def test_it_keeps_the_coordinator_from_changing_the_workspace(workspace, name, arguments):
    coordinator = Agent(workspace, "coordinator")

    outcome = coordinator.call(name, arguments)

    assert outcome.ok is False
    assert f"tool {name!r} is not available to the coordinator" in outcome.text
    assert not (workspace / "a.txt").exists()


def test_it_lets_the_coordinator_read_and_search(workspace):
    (workspace / "a.txt").write_text("hello\n")
    coordinator = Agent(workspace, "coordinator")

    calls = [
        coordinator.call("read_file", {"path": "a.txt"}),
        coordinator.call("glob", {"pattern": "*"}),
        coordinator.call("grep", {"pattern": "hello"}),
        coordinator.call("search", {"query": "laptop"}),
        coordinator.call("price_history", {"document_id": "rev-aster-swift-14"}),
    ]

    assert [outcome.ok for outcome in calls] == [True] * 5
