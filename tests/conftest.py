"""Shared fixtures: users (owner, teammate, staff), a real Celery worker, workflows."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from tests.workspace_mounts import release_under

TESTS = Path(__file__).resolve().parent
WORKFLOWS = TESTS / "workflows"
CATALOG = TESTS.parent / "runs" / "catalog"

# Forked children of a process that ran async tests hang in sync_to_async.
multiprocessing.set_start_method("spawn", force=True)


def pytest_collection_modifyitems(config, items):
    # Tests need no network: make sure a stray OpenAI setting cannot switch
    # the scripted provider off.
    for name in ("ZENWEB_LLM", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    _skip_sandbox_tests_without_bubblewrap(items)


def _skip_sandbox_tests_without_bubblewrap(items) -> None:
    """Tests that run commands need the sandbox (bubblewrap). A machine
    without it skips them, saying how to install it; CI=true never skips."""
    from agents.sandbox import probe

    if os.environ.get("CI") == "true" or not any(item.get_closest_marker("sandbox") for item in items):
        return
    problem = probe(os.environ.get("ZENWEB_SANDBOX_BWRAP", "bwrap"))
    if problem:
        skip = pytest.mark.skip(reason=f"needs the tool sandbox: {problem} (apt-get install bubblewrap)")
        for item in items:
            if item.get_closest_marker("sandbox"):
                item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _no_workspace_mount_left(tmp_path_factory):
    """Workspaces that tools gave their own file system (agents/workspace_quota.py)
    anywhere in this session's temporary folders, servers' included: none
    stays mounted, no loop device stays attached, even after a failure."""
    yield
    release_under(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True, scope="session")
def _no_cgroup_parent_left():
    """The sandbox made its calls' cgroups under a ``zenweb`` group below
    this process's own (agents/sandbox_cgroups.py); each call removed its
    own. The parents go too when the session ends, if no call of another
    process is in them (cgroup v1, where one comes back when needed), so
    that the host's cgroups are as they were."""
    yield
    from agents.sandbox_cgroups import controls

    if controls.cache_info().currsize:
        report = controls()
        for parent in set(report.dirs.values()) if report.version == 1 else ():
            with contextlib.suppress(OSError):
                parent.rmdir()


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hasher():
    """Users a test makes hash their passwords with MD5, as Django's testing
    docs advise: the default, PBKDF2 at a million iterations, takes half a
    second a password on this machine, and hundreds of tests make a user.
    Processes a test starts (a server, `manage.py`) keep the default."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _fresh_live_updates():
    """Run ids come back in a new test database: no update rendered for
    another test's run 1 may be served for this one's."""
    from runs.live import RECENT_UPDATES

    RECENT_UPDATES.clear()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pass")


@pytest.fixture
def teammate(django_user_model):
    return django_user_model.objects.create_user("teammate", password="teammate-pass")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", password="staff-pass", is_staff=True)


def _approver(django_user_model, username: str):
    """A user in the approvers group, which holds the approve permission."""
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name="approvers")
    group.permissions.add(Permission.objects.get(codename="decide_approval"))
    user = django_user_model.objects.create_user(username, password=f"{username}-pass")
    user.groups.add(group)
    return user


@pytest.fixture
def approver(django_user_model):
    return _approver(django_user_model, "approver")


@pytest.fixture
def second_approver(django_user_model):
    return _approver(django_user_model, "approver2")


OPENAI_TEST_MODEL = "tide-model"


@pytest.fixture
def openai_endpoint(monkeypatch):
    """A local OpenAI-compatible endpoint (tests/fake_openai_server.py) that
    the openai provider is configured for; queue its answers on it."""
    from tests.fake_openai_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-secret")
        monkeypatch.setenv("ZENWEB_MODEL", OPENAI_TEST_MODEL)
        yield server


@pytest.fixture
def celery_worker(transactional_db, settings, tmp_path, monkeypatch):
    """A real Celery worker (threads pool) consuming the memory broker: tasks
    go through the broker exactly as in production, not eagerly. Run
    workspaces go to the test's temporary directory."""
    from celery.contrib.testing.worker import start_worker
    from django.db import connection

    settings.ZENWEB_WORKSPACES = tmp_path / "workspaces"
    # Workers keep their threads' connections between tasks (zenweb/celery.py)
    # until CONN_MAX_AGE; the test worker's threads end with it, and
    # PostgreSQL would not drop a test database their sessions still use.
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)

    from zenweb.celery import app

    with start_worker(app, pool="threads", concurrency=4, perform_ping_check=False, loglevel="WARNING") as worker:
        yield worker
        _wake_to_stop(app)
    # The runs' workspaces that tools gave their own file system (agents/workspace_quota.py).
    release_under(settings.ZENWEB_WORKSPACES)


def _wake_to_stop(app) -> None:
    """Stop the test worker now rather than after its broker poll times out.

    Celery's loop checks the stop flag between polls of up to 2 s, and polls
    once more after seeing it (``synloop``: ``try: maybe_shutdown() finally:
    _loop_cycle()``), which cost each test about 4 s. Two no-op messages end
    both polls at once."""
    from celery.worker import state

    state.should_terminate = 0
    for _ in range(2):
        app.send_task("celery.accumulate")


def register(name: str):
    """Register tests/workflows/<name>.yaml (or the catalog's) and return the Workflow."""
    from runs.actions import do_register_workflow

    path = WORKFLOWS / f"{name}.yaml"
    if not path.exists():
        path = CATALOG / f"{name}.yaml"
    workflow, _ = do_register_workflow(path.read_text(), str(path))
    return workflow


def wait_for(predicate, timeout: float = 20.0):
    """Wait until ``predicate()`` returns something true and return it."""
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return found


def wait_for_run(run, timeout: float = 30.0):
    """Wait until ``run`` is terminal and return it refreshed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_terminal:
            return run
        time.sleep(0.05)
    types = list(run.events.values_list("type", flat=True))
    raise AssertionError(f"run {run.pk} still {run.status} after {timeout}s; events so far: {types}")


# What a user sees of each relay step: the sender's send_message turn, then its
# answer; the receiver drains the forwarded message first.
RELAY_FIRST_EVENTS = ["step_start", "agent_turn", "tool_call", "message_sent", "tool_call", "agent_turn", "step_end"]
RELAY_SECOND_EVENTS = ["step_start", "agent_inbox_drain", *RELAY_FIRST_EVENTS[1:]]


def event_types(run, *, step_id: str | None = None) -> list[str]:
    events = run.events.order_by("seq")
    if step_id is not None:
        events = events.filter(step_id=step_id)
    return list(events.values_list("type", flat=True))


def assert_gapless(run) -> None:
    """Event seqs of ``run`` are exactly 1..N."""
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
