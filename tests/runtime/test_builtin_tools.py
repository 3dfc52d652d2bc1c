"""The builtin files, shell and research toolsets, driven through the registry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from agents.events import ListSink
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.tools import INJECTED, ToolCallMeta, ToolContext, default_registry
from agents.tools.builtin.research import corpus
from agents.tools.builtin.shell import destructive_reason, die_with


class Agent:
    """One agent of a run, with the run's workspace injected."""

    def __init__(self, workspace: Path, role: str = "step", *, destructive_approved: bool = False) -> None:
        self.registry = default_registry()
        sink = ListSink()
        router = MessageRouter(InMemoryMailboxStore(), sink)
        step_id = COORDINATOR if role == "coordinator" else "build"
        meta = ToolCallMeta("run-1", f"run-1/{step_id}", f"{step_id}/1", "call-1")
        self.ctx = ToolContext(
            meta,
            step_id,
            role,
            router,
            sink,
            injected={"workspace": str(workspace)},
            destructive_approved=destructive_approved,
        )

    def call(self, name: str, arguments: dict):
        allowed = self.registry.for_role(self.ctx.role, [name])
        return self.registry.call(self.ctx, name, json.dumps(arguments), allowed)


def result_of(outcome) -> dict:
    assert outcome.ok, outcome.text
    return json.loads(outcome.text)


def hint_of(outcome) -> dict:
    return json.loads(outcome.text.splitlines()[-1].removeprefix("retry_hint: "))


@pytest.fixture
def workspace(tmp_path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def step(workspace) -> Agent:
    return Agent(workspace)


# files


def test_it_writes_a_file_and_reads_it_back(step, workspace):
    written = step.call("write_file", {"path": "notes/plan.md", "content": "# Plan\n\nship it\n"})
    read = step.call("read_file", {"path": "notes/plan.md"})

    assert written.ok is True
    assert written.text.startswith("created notes/plan.md")
    assert (workspace / "notes" / "plan.md").read_text() == "# Plan\n\nship it\n"
    assert result_of(read)["result"] == {"path": "notes/plan.md", "first_line": 1, "lines": ["# Plan", "", "ship it"]}
    assert result_of(read)["bounds"] == {"returned": 3, "total": 3, "truncated": False}


def test_it_creates_a_missing_workspace(tmp_path):
    workspace = tmp_path / "not-yet"

    outcome = Agent(workspace).call("write_file", {"path": "a.txt", "content": "hi"})

    assert outcome.ok is True
    assert (workspace / "a.txt").read_text() == "hi"


@pytest.fixture
def outside(tmp_path, workspace) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("do not read")
    (workspace / "link").symlink_to(path)
    (workspace / "secret.txt").symlink_to(path / "secret.txt")
    return path


@pytest.mark.parametrize(
    "path", ["../outside/new.txt", "OUTSIDE/new.txt", "link/new.txt", "notes/../../outside/new.txt"]
)
@pytest.mark.parametrize(
    ("name", "extra"),
    [("write_file", {"content": "x"}), ("edit_file", {"old": "do not", "new": "please"}), ("read_file", {})],
)
def test_it_refuses_paths_that_leave_the_workspace(step, outside, name, extra, path):
    path = path.replace("OUTSIDE", str(outside))

    outcome = step.call(name, {"path": path, **extra})

    assert outcome.ok is False
    assert f"path {path!r}" in outcome.text
    assert hint_of(outcome)["kind"] == "invalid_call"
    assert hint_of(outcome)["action"] == "correct_call"
    assert hint_of(outcome)["fields"] == ["path"]
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "do not read"


@pytest.mark.parametrize("name", ["read_file", "edit_file", "write_file"])
def test_it_refuses_a_symlinked_file_that_points_outside(step, outside, name):
    arguments = {"read_file": {}, "edit_file": {"old": "do not", "new": "x"}, "write_file": {"content": "x"}}[name]

    outcome = step.call(name, {"path": "secret.txt", **arguments})

    assert outcome.ok is False
    assert "resolves outside the workspace" in outcome.text
    assert "do not read" not in outcome.text
    assert (outside / "secret.txt").read_text() == "do not read"


def test_it_keeps_symlinks_out_of_the_workspace_from_glob_and_grep(step, workspace, outside):
    (workspace / "own.txt").write_text("do not read either\n")

    listed = result_of(step.call("glob", {"pattern": "**/*.txt"}))
    listed_in_link = result_of(step.call("glob", {"pattern": "link/*"}))
    found = result_of(step.call("grep", {"pattern": "do not"}))

    assert listed["result"] == ["own.txt"]
    assert listed_in_link["result"] == []
    assert found["result"] == ["own.txt:1: do not read either"]


def test_it_edits_only_text_that_occurs_exactly_once(step, workspace):
    (workspace / "config.py").write_text("a = 1\nb = 1\n")

    twice = step.call("edit_file", {"path": "config.py", "old": "= 1", "new": "= 2"})
    never = step.call("edit_file", {"path": "config.py", "old": "c = 1", "new": "c = 2"})
    unchanged = (workspace / "config.py").read_text()
    once = step.call("edit_file", {"path": "config.py", "old": "b = 1", "new": "b = 2"})

    assert twice.ok is False
    assert "occurs 2 times in config.py" in twice.text
    assert hint_of(twice)["fields"] == ["old"]
    assert never.ok is False
    assert "does not occur in config.py" in never.text
    assert unchanged == "a = 1\nb = 1\n"
    assert once.ok is True
    assert (workspace / "config.py").read_text() == "a = 1\nb = 2\n"


def test_it_reads_a_long_file_a_page_at_a_time(step, workspace):
    (workspace / "log.txt").write_text("".join(f"line {n}\n" for n in range(1, 501)))

    first = result_of(step.call("read_file", {"path": "log.txt"}))
    second = result_of(step.call("read_file", {"path": "log.txt", "offset": 200, "limit": 300}))

    assert first["result"]["lines"][-1] == "line 200"
    assert first["bounds"]["returned"] == 200
    assert first["bounds"]["total"] == 500
    assert first["bounds"]["truncated"] is True
    assert "offset=200" in first["bounds"]["refinement_hint"]
    assert second["result"]["first_line"] == 201
    assert second["result"]["lines"][0] == "line 201"
    assert second["bounds"] == {"returned": 300, "total": 500, "truncated": False}


def test_it_caps_a_page_of_huge_lines_below_the_result_cap(step, workspace):
    (workspace / "wide.txt").write_text(("x" * 5_000 + "\n") * 10)

    outcome = step.call("read_file", {"path": "wide.txt"})

    assert outcome.omitted is False
    bounds = result_of(outcome)["bounds"]
    assert 0 < bounds["returned"] < 10
    assert bounds["truncated"] is True


def test_it_pages_glob_results_with_a_cursor(step, workspace):
    for n in range(7):
        (workspace / f"doc{n}.md").write_text(f"TODO item {n}\n")
    (workspace / "skip.txt").write_text("TODO not markdown\n")

    first = result_of(step.call("glob", {"pattern": "*.md", "limit": 3}))
    second = result_of(step.call("glob", {"pattern": "*.md", "limit": 3, "cursor": first["bounds"]["next_cursor"]}))
    last = result_of(step.call("glob", {"pattern": "*.md", "limit": 3, "cursor": "6"}))

    assert first["result"] == ["doc0.md", "doc1.md", "doc2.md"]
    assert first["bounds"]["total"] == 7
    assert first["bounds"]["truncated"] is True
    assert first["bounds"]["next_cursor"] == "3"
    assert "refinement_hint" in first["bounds"]
    assert second["result"] == ["doc3.md", "doc4.md", "doc5.md"]
    assert last["result"] == ["doc6.md"]
    assert last["bounds"] == {"returned": 1, "total": 7, "truncated": False}


def test_it_pages_grep_matches_with_a_cursor(step, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("# TODO one\nx = 1\n# todo two\n")
    (workspace / "src" / "b.py").write_text("# TODO three\n")
    (workspace / "notes.md").write_text("TODO not python\n")

    first = result_of(step.call("grep", {"pattern": "TODO", "path": "src/*.py", "ignore_case": True, "limit": 2}))
    rest = result_of(
        step.call("grep", {"pattern": "TODO", "path": "src/*.py", "ignore_case": True, "cursor": "2", "limit": 2})
    )

    assert first["result"] == ["src/a.py:1: # TODO one", "src/a.py:3: # todo two"]
    assert first["bounds"]["total"] == 3
    assert first["bounds"]["truncated"] is True
    assert first["bounds"]["next_cursor"] == "2"
    assert rest["result"] == ["src/b.py:1: # TODO three"]
    assert rest["bounds"]["truncated"] is False


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("glob", {"pattern": "*", "cursor": "abc"}, "cursor"),
        ("grep", {"pattern": "x", "cursor": "99"}, "cursor"),
        ("grep", {"pattern": "("}, "pattern"),
        ("glob", {"pattern": "../*"}, "pattern"),
        ("glob", {"pattern": "."}, "pattern"),
    ],
)
def test_it_names_the_field_of_a_bad_listing_request(step, name, arguments, field):
    outcome = step.call(name, arguments)

    assert outcome.ok is False
    assert hint_of(outcome)["kind"] == "invalid_call"
    assert hint_of(outcome)["fields"] == [field]


def test_it_never_shows_the_workspace_to_the_model():
    registry = default_registry()

    for tool in registry.tools():
        parameters = tool.schema()["function"]["parameters"]
        assert "workspace" not in parameters["properties"], tool.name
        assert "workspace" not in parameters.get("required", []), tool.name
        assert "workspace" not in tool.catalog_entry()["payload"]["schema"]["properties"], tool.name


def test_it_ignores_a_workspace_the_model_made_up_and_redacts_it(step, workspace, tmp_path):
    elsewhere = tmp_path / "elsewhere"

    outcome = step.call("write_file", {"path": "a.txt", "content": "hi", "workspace": str(elsewhere)})

    assert outcome.ok is True
    assert outcome.arguments == {"path": "a.txt", "content": "hi", "workspace": INJECTED}
    assert (workspace / "a.txt").read_text() == "hi"
    assert not elsewhere.exists()


def test_it_cannot_touch_files_without_a_workspace(step):
    step.ctx.injected = {}

    outcome = step.call("write_file", {"path": "a.txt", "content": "hi"})

    assert outcome.ok is False
    assert "workspace not available" in outcome.text
    assert hint_of(outcome)["kind"] == "unavailable"


def test_it_refuses_content_over_the_write_cap(step, workspace):
    outcome = step.call("write_file", {"path": "big.txt", "content": "x" * 256_001})

    assert outcome.ok is False
    assert "content: String should have at most 256000 characters" in outcome.text
    assert not (workspace / "big.txt").exists()


# shell


@pytest.mark.sandbox
def test_it_runs_a_command_in_the_workspace_and_reports_its_exit_code(step, workspace):
    outcome = step.call("run_shell", {"command": "pwd; echo out; echo err >&2; touch made.txt; exit 3"})

    assert outcome.ok is True
    lines = outcome.text.splitlines()
    assert lines[0] == "exit code: 3"
    assert lines[1:] == [str(workspace.resolve()), "out", "err"]
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
    assert "TMPDIR=/tmp\n" in outcome.text  # the sandbox's own, in memory


@pytest.mark.sandbox
def test_it_stops_a_command_that_runs_too_long_with_its_children(step, workspace):
    started = time.monotonic()

    outcome = step.call("run_shell", {"command": "sleep 30.25 & echo started; wait", "timeout": 1})

    assert time.monotonic() - started < 3
    assert outcome.ok is False
    assert outcome.error_kind == "timeout"
    assert "timed out after 1s" in outcome.text
    assert "started" in outcome.text
    assert hint_of(outcome)["fields"] == ["timeout"]
    # Its pid inside the sandbox's PID namespace means nothing out here: look for its command line.
    assert processes_running("sleep 30.25") == []


def processes_running(command_line: str) -> list[int]:
    """Live (not zombie) processes whose command line is exactly ``command_line``, after a moment to die."""
    found: list[int] = []
    for _ in range(100):
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
                if (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip() == command_line:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
        if not found:
            return []
        time.sleep(0.02)
    return found


@pytest.mark.sandbox
def test_it_caps_long_output_with_a_note(step):
    outcome = step.call("run_shell", {"command": "head -c 100000 /dev/zero | tr '\\0' x; echo; echo THE-END"})

    assert outcome.ok is True
    assert outcome.omitted is False
    assert len(outcome.text) <= 16_000
    assert "[output truncated: 15000 of 100009 chars shown" in outcome.text
    assert outcome.text.startswith("exit code: 0\nxxx")
    assert outcome.text.endswith("THE-END\n")


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
    assert outcome.text == "exit code: 0\n(no output)"
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


# research

SOURCE_FIELDS = {"source_ref", "title", "url", "source_name", "source_domain", "source_type", "published", "snippet"}


def test_it_finds_laptops_under_a_price_with_citable_sources(step):
    outcome = step.call("search", {"query": "laptops under $1000", "limit": 20})

    found = result_of(outcome)
    findings = found["result"]["findings"]
    assert found["result"]["max_price_usd"] == 1000
    assert len(findings) >= 5
    assert found["bounds"] == {"returned": len(findings), "total": len(findings), "truncated": False}
    for finding in findings:
        assert SOURCE_FIELDS <= set(finding)
        assert finding["price_usd"] <= 1000
        assert finding["url"].startswith("https://")
        assert finding["url"].split("/")[2] == finding["source_domain"]
        assert corpus()[finding["source_ref"]].title == finding["title"]
    assert "rev-korvo-pro-16" not in {f["source_ref"] for f in findings}


def test_it_pages_search_results_without_repeats(step):
    everything = result_of(step.call("search", {"query": "laptop battery", "limit": 20}))
    seen: list[str] = []
    cursor = None
    while True:
        page = result_of(step.call("search", {"query": "laptop battery", "limit": 4, "cursor": cursor}))
        seen += [f["source_ref"] for f in page["result"]["findings"]]
        cursor = page["bounds"].get("next_cursor")
        if cursor is None:
            break
        assert page["bounds"]["truncated"] is True
        assert page["bounds"]["refinement_hint"]

    assert len(seen) == len(set(seen)) == everything["bounds"]["total"] > 4
    assert seen[:20] == [f["source_ref"] for f in everything["result"]["findings"]]


def test_it_shows_search_results_to_people_as_a_table_the_model_never_sees(step):
    outcome = step.call("search", {"query": "laptops under $1000", "limit": 3})

    [table] = outcome.artifacts
    assert table.kind == "table"
    assert table.audience == "evidence"
    assert table.source_tool == "zenweb.research.search"
    assert table.data["columns"] == ["title", "source", "price", "url"]
    findings = result_of(outcome)["result"]["findings"]
    assert [row[0] for row in table.data["rows"]] == [f["title"] for f in findings]
    assert all(row[2].startswith("$") for row in table.data["rows"])
    assert '"columns"' not in outcome.text
    assert '"rows"' not in outcome.text


def test_it_refuses_a_cursor_it_did_not_hand_out(step):
    outcome = step.call("search", {"query": "laptop", "cursor": "page-2"})

    assert outcome.ok is False
    assert "cursor 'page-2'" in outcome.text
    assert hint_of(outcome)["kind"] == "invalid_call"
    assert hint_of(outcome)["fields"] == ["cursor"]


def test_it_summarizes_a_price_history_and_charts_it_for_people(step):
    history = corpus()["rev-aster-swift-14"].price_history

    outcome = step.call("price_history", {"document_id": "rev-aster-swift-14"})

    assert outcome.ok is True
    assert "5 price points" in outcome.text
    assert "Latest $849 on 2025-02-10" in outcome.text
    assert "lowest $849" in outcome.text
    assert "highest $949 on 2024-10-01" in outcome.text
    [chart] = outcome.artifacts
    assert chart.kind == "timeseries"
    assert chart.audience == "evidence"
    [series] = chart.data["series"]
    assert [(x, y) for x, y in series["points"]] == [(day.isoformat(), price) for day, price in history]
    assert "2024-11-15" not in outcome.text


def test_it_suggests_close_ids_for_an_unknown_document(step):
    outcome = step.call("price_history", {"document_id": "rev-aster-swift"})

    assert outcome.ok is False
    assert "unknown document 'rev-aster-swift'" in outcome.text
    assert "rev-aster-swift-14" in outcome.text
    assert hint_of(outcome)["fields"] == ["document_id"]
    assert outcome.artifacts == []


def test_it_ships_a_corpus_of_cited_consumer_tech_documents():
    documents = corpus()

    assert len(documents) >= 25
    laptops = [d for d in documents.values() if "laptop" in d.tags and d.source_type != "news"]
    assert laptops and all(d.price_history for d in laptops)
    assert {d.source_type for d in documents.values()} == {"review", "retailer", "news", "spec-sheet"}


def test_it_declares_what_the_new_tools_show_people_in_the_catalog():
    entries = {entry["id"]: entry for entry in default_registry().catalog()["tools"]}

    assert [(d["kind"], d["audience"]) for d in entries["zenweb.research.search"]["server_data"]] == [
        ("table", "evidence")
    ]
    assert entries["zenweb.research.price_history"]["server_data"][0]["kind"] == "timeseries"
    assert entries["zenweb.shell.run_shell"]["tags"] == ["execution", "destructive-capable"]
    assert {"zenweb.files.read_file", "zenweb.files.write_file", "zenweb.files.edit_file"} <= set(entries)


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="util-linux's setpriv is not installed")
def test_a_command_whose_worker_died_while_starting_it_never_runs(tmp_path):
    # The worker that started it is gone (its pid is not the command's
    # parent): what would have run stops before it starts.
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    stopped = subprocess.run([*die_with(int(gone)), "sh", "-c", "echo ran > f"], cwd=tmp_path)
    assert stopped.returncode == 137 and not (tmp_path / "f").exists()

    ran = subprocess.run([*die_with(os.getpid()), "sh", "-c", "echo ran > f"], cwd=tmp_path)
    assert ran.returncode == 0 and (tmp_path / "f").read_text() == "ran\n"
