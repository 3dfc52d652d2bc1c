"""The terminal commands, run as a user would: in their own process."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.conftest import WORKFLOWS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A private SQLite database for the commands, migrated once."""
    path = tmp_path_factory.mktemp("zenweb-data")
    manage(path, "migrate", "-v0", check=True)
    return path


def manage(data_dir: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env["ZENWEB_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


def run_count(data_dir: Path) -> int:
    with sqlite3.connect(data_dir / "zenweb.sqlite3") as db:
        return db.execute("select count(*) from runs_run").fetchone()[0]


def test_it_validates_a_good_workflow_with_a_summary(data_dir):
    result = manage(data_dir, "validate_workflow", str(WORKFLOWS / "relay.yaml"))
    assert result.returncode == 0
    assert result.stdout.strip() == f"{WORKFLOWS / 'relay.yaml'}: ok: relay v1: 2 steps, 2 agents"


def test_it_reports_every_problem_with_file_line_and_field(data_dir, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\n"
        "agents:\n"
        "  a: {description: a agent, system: hi}\n"
        "steps:\n"
        "  - id: one\n"
        "    agent: ghost\n"
        "  - id: two\n"
        "    agent: a\n"
        "    dependsOn: [three]\n"
        "    colour: blue\n"
    )

    result = manage(data_dir, "validate_workflow", str(path))

    assert result.returncode != 0
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"{path}:6: steps[0].agent: unknown agent 'ghost'") for line in lines), lines
    assert any(line.startswith(f"{path}:9: steps[1].dependsOn[0]:") and "three" in line for line in lines), lines
    assert any(line.startswith(f"{path}:10: steps[1].colour: unknown field 'colour'") for line in lines), lines


def test_it_follows_a_run_to_completion(data_dir):
    result = manage(data_dir, "run_workflow", str(WORKFLOWS / "relay.yaml"), "--input", "subject=tides", "--follow")

    assert result.returncode == 0, result.stderr
    types = [line.split()[2] for line in result.stdout.splitlines() if line.startswith("#")]
    assert types[0] == "workflow_start" and types[-1] == "workflow_end"
    assert types.index("coordinator_message") < types.index("agent_inbox_drain")
    assert "second says: second got: the subject is tides" in result.stdout
    assert result.stdout.strip().endswith("completed")
    # The file is stored for its run, not offered to commands (docs/commands-and-approvals.md).
    with sqlite3.connect(data_dir / "zenweb.sqlite3") as db:
        assert db.execute("select offer from runs_workflow where name = 'relay'").fetchall() == [("ad_hoc",)]


def test_it_exits_non_zero_when_the_run_fails(data_dir):
    result = manage(data_dir, "run_workflow", str(WORKFLOWS / "broken_provider.yaml"), "--follow")

    assert result.returncode != 0
    assert "ended failed: step fetch failed: model endpoint said: 503 upstream overloaded" in result.stderr


def test_it_never_starts_a_run_from_an_invalid_file(data_dir, tmp_path):
    path = tmp_path / "cycle.yaml"
    path.write_text(
        "name: cycle\nagents: {a: {description: a agent}}\nsteps:\n"
        "  - {id: x, agent: a, dependsOn: [y]}\n"
        "  - {id: y, agent: a, dependsOn: [x]}\n"
    )
    before = run_count(data_dir)

    result = manage(data_dir, "run_workflow", str(path), "--follow")

    assert result.returncode == 2
    assert f"{path}:4: steps[0].dependsOn[0]: dependency cycle: x -> y -> x" in result.stderr
    assert run_count(data_dir) == before


def test_it_names_a_missing_required_input(data_dir):
    before = run_count(data_dir)

    result = manage(data_dir, "run_workflow", str(WORKFLOWS / "relay.yaml"), "--follow")

    assert result.returncode == 2
    assert "missing required input 'subject'" in result.stderr
    assert run_count(data_dir) == before


def test_it_exports_the_tool_schemas(data_dir, tmp_path):
    output = tmp_path / "tool_schemas.json"

    result = manage(data_dir, "export_tool_schemas", "--output", str(output))

    assert result.returncode == 0, result.stderr
    tools = {tool["id"]: tool for tool in json.loads(output.read_text())["tools"]}
    assert tools["zenweb.messaging.send_message"]["payload"]["schema"]["properties"]["text"]["maxLength"] == 32000
    # The schema is the one the model sees: the injected workspace path is not in it.
    assert set(tools["zenweb.files.write_file"]["payload"]["schema"]["properties"]) == {"path", "content"}
    assert tools["zenweb.research.search"]["server_data"][0]["kind"] == "table"
    # A tool's result model is its result schema (tests/runtime/test_tool_result_schemas.py).
    assert tools["zenweb.files.read_file"]["result"]["name"] == "ReadFileResult"


@pytest.mark.django_db
def test_it_exports_the_tool_schemas_to_a_path_given_as_an_argument(tmp_path):
    output = tmp_path / "schemas.json"
    stdout = StringIO()

    call_command("export_tool_schemas", str(output), stdout=stdout)

    assert stdout.getvalue().startswith("wrote ") and stdout.getvalue().strip().endswith(str(output))
    search = next(t for t in json.loads(output.read_text())["tools"] if t["id"] == "zenweb.research.search")
    assert search["result"]["schema"]["$defs"]["SearchFinding"]["required"][:3] == ["source_ref", "title", "url"]
    with pytest.raises(CommandError, match="give the file once"):
        call_command("export_tool_schemas", str(output), "--output", str(tmp_path / "other.json"))


def test_it_registers_a_workflow_file_as_the_next_version(data_dir, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nagents: {a: {description: a agent}}\nsteps:\n  - {id: s, agent: a}\n")

    first = manage(data_dir, "register_workflow", str(path))
    path.write_text(path.read_text() + "description: second\n")
    second = manage(data_dir, "register_workflow", str(path))

    assert (first.returncode, first.stdout.strip()) == (0, "registered mine v1")
    assert (second.returncode, second.stdout.strip()) == (0, "registered mine v2")


def test_validate_and_register_print_what_zenweb_accepts_but_does_not_run_yet(data_dir):
    path = ROOT / "tests" / "workflows" / "zenflow" / "not_run.yaml"

    checked = manage(data_dir, "validate_workflow", str(path))
    registered = manage(data_dir, "register_workflow", str(path))

    warnings = [
        f"{path}:13: steps[1].retries: warning: accepted; not run by zenweb yet: retries of a loop or an include "
        "(a step's retries run)",
    ]
    assert (checked.returncode, checked.stdout.splitlines()[1:]) == (0, warnings)
    assert (registered.returncode, registered.stdout.splitlines()) == (0, ["registered not-run-yet v1", *warnings])


def test_it_refuses_to_register_an_invalid_workflow_listing_every_problem(data_dir, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(
        "name: broken\nmode: sideways\nagents: {a: {description: a agent}}\nsteps:\n  - {id: s, agent: ghost}\n"
    )

    result = manage(data_dir, "register_workflow", str(path))

    assert result.returncode == 1
    assert "2 problem(s)" in result.stderr
    assert f"{path}:2: mode:" in result.stderr
    assert f"{path}:5: steps[0].agent:" in result.stderr
