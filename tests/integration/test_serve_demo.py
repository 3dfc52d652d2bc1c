"""`manage.py serve`'s demo: besides its demo runs it types a command, as a
person would, so a fresh `make run` shows a workflow picked from the catalog
and a run that records claims with their sources."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from runs.actions import do_load_catalog
from runs.models import Command as CommandRow
from runs.models import Run
from tests.conftest import wait_for_run
from zenweb.management.commands.serve import DEMO_COMMAND, Command

pytestmark = pytest.mark.django_db(transaction=True)


def demo_command(user) -> str:
    out = io.StringIO()
    Command(stdout=out)._demo_command(user, "http://127.0.0.1:8000")
    return out.getvalue()


def test_it_starts_the_research_workflow_from_the_demo_command_and_gets_claims(celery_worker, owner):
    do_load_catalog(settings.ZENWEB_CATALOG_DIR)

    printed = demo_command(owner)

    command = CommandRow.objects.get()
    assert command.text == DEMO_COMMAND
    assert printed.strip().endswith(f"started http://127.0.0.1:8000/runs/{command.run_id}/ (research)")
    run = wait_for_run(command.run)
    assert run.status == "completed"
    assert {claim.source_ref for claim in run.claims.all()} == {"shop-aster-swift-14", "rev-aster-swift-14"}


def test_it_says_why_when_the_catalog_cannot_answer_the_demo_command(owner):
    printed = demo_command(owner)

    assert "started no run:" in printed
    assert not CommandRow.objects.exclude(run=None).exists()


# -- when `serve` starts the demo ------------------------------------------------


@pytest.fixture
def serve(settings, tmp_path, monkeypatch):
    """`manage.py serve` up to the point where it would listen: the worker
    thread and daphne are left out. Returns what it printed."""
    from zenweb import embedded

    settings.DATA_DIR = tmp_path  # the admin password file
    monkeypatch.setattr(embedded, "start_worker_thread", lambda: None)
    # Port 8000 may be taken on this machine: the check is its own test's.
    monkeypatch.setattr(embedded, "check_address", lambda host, port: None)
    monkeypatch.setattr(embedded, "serve", lambda host, port, listening: listening())

    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("serve", *args, stdout=out)
        return out.getvalue()

    return run


def demo_urls(printed: str) -> list[str]:
    return re.findall(r"demo (?:run|command): .*?(http://\S+/runs/\d+/)", printed)


def test_it_starts_the_demo_on_the_embedded_default_and_not_again_on_restart(serve):
    first = serve()
    again = serve()

    assert len(demo_urls(first)) == 3
    assert Run.objects.count() == 3
    assert CommandRow.objects.count() == 1
    # A restart shows the runs it started before, and starts none.
    assert demo_urls(again) == demo_urls(first)


def test_it_spends_no_real_model_tokens_unasked(serve, openai_endpoint, monkeypatch):
    monkeypatch.setenv("ZENWEB_LLM", "openai")

    printed = serve()

    assert "demo runs: not started (ZENWEB_LLM=openai would spend its tokens; pass --demo)" in printed
    assert not Run.objects.exists() and not CommandRow.objects.exists()
    assert openai_endpoint.requests == []


def test_it_starts_the_demo_on_a_real_model_when_asked(serve, openai_endpoint, monkeypatch):
    monkeypatch.setenv("ZENWEB_LLM", "openai")
    selection = {"_type": "COORDINATOR_SELECTION", "workflow_selected": "research", "status": "selected"}
    openai_endpoint.push_text(json.dumps(selection | {"workflow_args": {"query": "laptops under $1000"}}))

    printed = serve("--demo")

    assert len(demo_urls(printed)) == 3
    assert Run.objects.get(command=DEMO_COMMAND).inputs == {"query": "laptops under $1000"}
    assert len(openai_endpoint.requests) == 1  # the command's selection; the runs wait for a worker


def test_it_starts_no_demo_in_services_mode_or_with_no_demo(serve, settings):
    assert demo_urls(serve("--no-demo")) == []
    settings.EMBEDDED = False
    assert "demo runs: not started in services mode (pass --demo)" in serve()
    assert not Run.objects.exists()


def test_it_says_the_port_is_taken_and_starts_nothing(settings, tmp_path, monkeypatch):
    from zenweb import embedded

    settings.DATA_DIR = tmp_path
    monkeypatch.setattr(embedded, "start_worker_thread", lambda: None)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError) as refused:
            call_command("serve", "--port", str(port), stdout=io.StringIO())

    assert str(refused.value) == (
        f"cannot serve on 127.0.0.1:{port}: Address already in use. "
        f"Another port: make run PORT={port + 1}, or --port {port + 1}"
    )
    assert not Run.objects.exists() and not CommandRow.objects.exists()


def test_it_says_when_it_listens(serve):
    printed = serve("--no-demo", "--port", "8123")

    assert printed.splitlines()[-1] == "listening on http://127.0.0.1:8123/"


def test_daphne_that_cannot_listen_makes_serve_raise_and_never_say_it_listens():
    # The port taken between check_address and daphne's bind: daphne logs
    # its "Listen failure" and returns. Its reactor runs in a process of its
    # own here (it cannot be restarted in the test's).
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = (
            "import django; django.setup(); from zenweb import embedded; "
            f"embedded.serve('127.0.0.1', {port}, lambda: print('listening', flush=True))"
        )
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "zenweb.settings", "PYTHONPATH": str(settings.BASE_DIR)}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)

    assert done.returncode == 1, done.stderr
    assert "listening" not in done.stdout
    assert done.stderr.strip().splitlines()[-1] == f"OSError: could not listen on 127.0.0.1:{port}"


def test_it_says_the_port_was_taken_after_its_check(serve, monkeypatch):
    from zenweb import embedded

    def cannot_listen(host, port, listening):
        raise OSError(f"could not listen on {host}:{port}")

    monkeypatch.setattr(embedded, "serve", cannot_listen)
    with pytest.raises(CommandError) as refused:
        serve("--no-demo", "--port", "8123")

    assert str(refused.value) == (
        "cannot serve on 127.0.0.1:8123: could not listen on 127.0.0.1:8123. "
        "Another port: make run PORT=8124, or --port 8124"
    )


def serve_in_a_new_process(tmp_path, port: int | None = None, **environ: str) -> subprocess.CompletedProcess:
    """`manage.py serve` in a fresh process with its own data folder and
    ``environ``, none of this one's database or Redis settings."""
    keep = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ZENWEB_TEST_DB"}}
    env = keep | {"ZENWEB_DATA_DIR": str(tmp_path / "var")} | environ
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    return subprocess.run(
        [sys.executable, "manage.py", "serve", "--no-demo", "--port", str(port)],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_says_in_one_line_that_the_database_is_not_migrated_and_starts_nothing(tmp_path):
    done = serve_in_a_new_process(tmp_path)

    assert done.returncode == 1
    assert re.fullmatch(
        r"CommandError: the sqlite database \S+ lacks \d+ migrations: run `manage.py migrate` first\n", done.stderr
    ), done.stderr


def test_it_says_in_one_line_that_the_database_cannot_be_reached(tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    done = serve_in_a_new_process(tmp_path, DATABASE_URL=f"postgres://zenweb:hunter2pw@127.0.0.1:{port}/zenweb")

    assert done.returncode == 1
    assert done.stderr.startswith(f"CommandError: cannot use the postgresql database zenweb at 127.0.0.1:{port}: ")
    assert "refused" in done.stderr and done.stderr.count("\n") == 1 and "hunter2pw" not in done.stderr


def test_it_refuses_a_port_number_past_the_last_one(tmp_path):
    done = serve_in_a_new_process(tmp_path, port=99999)

    assert (done.returncode, done.stderr) == (
        1,
        "CommandError: --port must be a port number from 1 to 65535, got 99999\n",
    )


def test_load_catalog_says_when_its_folder_is_missing_or_holds_no_workflow(tmp_path):
    with pytest.raises(CommandError, match=f"no catalog folder {tmp_path / 'nowhere'}"):
        call_command("load_catalog", str(tmp_path / "nowhere"))
    out = io.StringIO()
    call_command("load_catalog", str(tmp_path), stdout=out)
    assert out.getvalue() == f"no workflow files (*.yaml) in {tmp_path}\n"


def test_export_tool_schemas_says_it_cannot_write_where_it_was_told(tmp_path):
    target = tmp_path / "no-such-folder" / "tool_schemas.json"
    with pytest.raises(CommandError, match=f"cannot write {target}: No such file or directory"):
        call_command("export_tool_schemas", "--output", str(target))
