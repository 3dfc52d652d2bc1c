"""The builtin files toolset, driven through the registry: reading, writing
and editing in the run's workspace, paging listings, and paths that leave it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.tools import INJECTED, default_registry
from agents.tools.builtin import files
from tests.runtime.tool_agent import Agent, hint_of, result_of


def test_it_writes_a_file_and_reads_it_back(step, workspace):
    written = step.call("write_file", {"path": "notes/plan.md", "content": "# Plan\n\nship it\n"})
    read = step.call("read_file", {"path": "notes/plan.md"})

    assert written.ok is True
    assert result_of(written)["result"] == {"path": "notes/plan.md", "action": "created", "bytes": 16}
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
    assert hint_of(outcome)["missing_fields"] == ["path"]
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


@pytest.mark.parametrize(
    ("name", "extra"),
    [("read_file", {}), ("write_file", {"content": "planted"}), ("edit_file", {"old": "do not", "new": "please"})],
)
def test_it_follows_no_folder_swapped_for_a_symlink_after_the_path_was_checked(
    step, workspace, outside, monkeypatch, name, extra
):
    # A turn's tool calls run in parallel: a run_shell of the same turn can
    # swap a folder for a symlink out of the workspace (rename, ln -s) at
    # any moment, here the worst one: between the check and the open.
    (workspace / "d").mkdir()
    (workspace / "d" / "secret.txt").write_text("mine: do not lose\n")
    check = files.resolve

    def check_then_swap(root, path):
        checked = check(root, path)
        (workspace / "d").rename(workspace / "d.moved")
        (workspace / "d").symlink_to(outside)
        return checked

    monkeypatch.setattr(files, "resolve", check_then_swap)

    outcome = step.call(name, {"path": "d/secret.txt", **extra})

    assert outcome.ok is False
    assert "path 'd/secret.txt' changed while it was opened" in outcome.text
    assert "do not read" not in outcome.text
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "do not read"


def test_it_creates_no_folder_through_a_symlink_swapped_in_after_the_check(step, workspace, outside, monkeypatch):
    (workspace / "d").mkdir()
    check = files.resolve

    def check_then_swap(root, path):
        checked = check(root, path)
        (workspace / "d").rmdir()
        (workspace / "d").symlink_to(outside)
        return checked

    monkeypatch.setattr(files, "resolve", check_then_swap)

    outcome = step.call("write_file", {"path": "d/new/planted.txt", "content": "planted"})

    assert outcome.ok is False
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


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
    assert hint_of(twice)["missing_fields"] == ["old"]
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
    assert hint_of(outcome)["missing_fields"] == [field]


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


@pytest.mark.parametrize(("pattern", "named"), [(r"(a)\1", r"invalid escape sequence: \1"), ("a(?=b)", "(?=")])
def test_grep_says_which_syntax_its_linear_time_matching_lacks(step, workspace, pattern, named):
    (workspace / "a.txt").write_text("aab\n")

    outcome = step.call("grep", {"pattern": pattern})

    assert outcome.ok is False
    assert "pattern uses syntax grep does not support" in outcome.text
    assert named in outcome.text and "backreferences" in outcome.text
    assert hint_of(outcome)["missing_fields"] == ["pattern"]


def test_grep_matches_an_exponential_backtracking_pattern_line_by_line_in_linear_time(step, workspace):
    # Under Python's re each of these lines would take longer than the one before, doubling.
    (workspace / "a.txt").write_text("".join("A" * n + "\n" for n in range(20, 40)) + "AAB\n")

    found = result_of(step.call("grep", {"pattern": "(A|A)*B", "ignore_case": True}))

    assert found["result"] == ["a.txt:21: AAB"]


def test_grep_stops_reading_at_its_budget_and_says_so(step, workspace, monkeypatch):
    monkeypatch.setattr(files, "MAX_GREP_TOTAL_BYTES", 10)
    (workspace / "a.txt").write_text("hit\n")
    (workspace / "b.txt").write_text("hit again\n")

    found = result_of(step.call("grep", {"pattern": "hit"}))

    assert found["result"] == ["a.txt:1: hit"]
    assert found["bounds"]["truncated"] is True
