"""The runs list: filters, paging, progress, live polling, and its cost."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from runs.models import Run, Step
from tests.conftest import register

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def listed(client, **params) -> list[int]:
    """Ids of the runs the list shows, in order."""
    page = client.get("/", params).content.decode()
    return [int(pk) for pk in re.findall(r'<tr id="run-(\d+)"', page)]


def make_run(workflow, user, **fields) -> Run:
    return Run.objects.create(workflow=workflow, created_by=user, inputs={"subject": "x"}, **fields)


@pytest.fixture
def relay():
    return register("relay")


@pytest.fixture
def xss():
    return register("xss")


def test_it_filters_runs_by_status(client, owner, relay):
    running = make_run(relay, owner, status=Run.Status.RUNNING)
    failed = make_run(relay, owner, status=Run.Status.FAILED)
    client.force_login(owner)

    assert listed(client, status="running") == [running.pk]
    assert listed(client, status="failed") == [failed.pk]
    assert listed(client) == [failed.pk, running.pk]


def test_it_lists_the_runs_under_way_that_are_stuck(client, owner, relay):
    why = "no progress for 130s: resumed (its work was queued again)"
    stuck = make_run(relay, owner, status=Run.Status.RUNNING, stuck_reason=why)
    make_run(relay, owner, status=Run.Status.RUNNING)
    make_run(relay, owner, status=Run.Status.FAILED, stuck_reason="an old reason, the run ended since")
    client.force_login(owner)

    assert listed(client, status="stuck") == [stuck.pk]
    row = re.search(rf'<tr id="run-{stuck.pk}".*?</tr>', client.get("/").content.decode(), re.S).group(0)
    assert f'<span class="badge bad" title="{why}">stuck</span>' in row


def test_it_filters_runs_by_workflow_name(client, owner, relay, xss):
    relay_run = make_run(relay, owner)
    xss_run = make_run(xss, owner)
    client.force_login(owner)

    assert listed(client, workflow="relay") == [relay_run.pk]
    assert listed(client, workflow="xss") == [xss_run.pk]
    page = client.get("/").content.decode()
    assert '<option value="relay"' in page and '<option value="xss"' in page


def test_it_lets_staff_filter_by_who_started_a_run(client, owner, teammate, staff, relay):
    mine = make_run(relay, owner)
    theirs = make_run(relay, teammate)
    client.force_login(staff)

    assert listed(client, user="owner") == [mine.pk]
    assert listed(client, user="teammate") == [theirs.pk]
    assert listed(client) == [theirs.pk, mine.pk]
    page = client.get("/").content.decode()
    assert 'name="user"' in page
    for username in ("owner", "teammate", "staff"):
        assert f'<option value="{username}"' in page


def test_it_offers_no_choice_of_users_to_others(client, owner, relay):
    client.force_login(owner)

    assert 'name="user"' not in client.get("/").content.decode()


def test_it_filters_runs_by_created_date_range(client, owner, relay):
    days = {}
    for day in (1, 2, 3):
        run = make_run(relay, owner)
        Run.objects.filter(pk=run.pk).update(created=datetime(2025, 3, day, 23, 30, tzinfo=UTC))
        days[day] = run.pk
    client.force_login(owner)

    assert listed(client, **{"from": "2025-03-02"}) == [days[3], days[2]]
    assert listed(client, to="2025-03-02") == [days[2], days[1]]
    assert listed(client, **{"from": "2025-03-02", "to": "2025-03-02"}) == [days[2]]
    # A date that names no day filters nothing.
    assert listed(client, to="2025-02-30") == [days[3], days[2], days[1]]


def test_it_takes_the_first_and_last_days_there_are_as_dates(client, owner, relay):
    run = make_run(relay, owner)
    client.force_login(owner)

    # The day after 9999-12-31 is past datetime's range: no end, as for a date that names no day.
    assert listed(client, to="9999-12-31") == [run.pk]
    assert listed(client, **{"from": "0001-01-01", "to": "9999-12-31"}) == [run.pk]
    assert listed(client, **{"from": "9999-12-31"}) == []
    assert listed(client, to="0001-01-01") == []
    assert client.get("/", {"to": "9999-12-31"}, headers=HTMX).status_code == 200


def test_it_searches_command_text_result_error_and_id(client, owner, relay):
    asked = make_run(relay, owner, command="compare laptops under $1000")
    answered = make_run(relay, owner, result="the tide is high")
    broken = make_run(relay, owner, error="step fetch failed: 503")
    client.force_login(owner)

    assert listed(client, q="LAPTOPS") == [asked.pk]
    assert listed(client, q="tide") == [answered.pk]
    assert listed(client, q="503") == [broken.pk]
    assert listed(client, q=str(answered.pk)) == [answered.pk]
    assert listed(client, q=f"#{asked.pk}") == [asked.pk]
    assert listed(client, q="nothing like this") == []
    assert "No runs match these filters." in client.get("/", {"q": "nothing like this"}).content.decode()


def test_it_never_shows_others_runs_whatever_the_filters(client, owner, teammate, relay):
    theirs = make_run(relay, owner, status=Run.Status.RUNNING, command="secret plans")
    mine = make_run(relay, teammate, status=Run.Status.RUNNING)
    client.force_login(teammate)

    assert listed(client) == [mine.pk]
    assert listed(client, user="owner") == [mine.pk]
    assert listed(client, q=str(theirs.pk)) == []
    assert listed(client, q="secret") == []
    assert listed(client, status="running", workflow="relay") == [mine.pk]
    assert f'href="/runs/{theirs.pk}/"' not in client.get("/", {"q": str(theirs.pk)}, headers=HTMX).content.decode()


def test_it_shows_the_progress_of_each_run(client, owner, relay):
    run = make_run(relay, owner, status=Run.Status.RUNNING)
    Step.objects.create(run=run, step_id="coordinator", kind=Step.Kind.COORDINATOR, agent="c", status="running")
    Step.objects.create(run=run, step_id="first", agent="a", position=1, status=Step.Status.COMPLETED)
    Step.objects.create(run=run, step_id="second", agent="a", position=2, status=Step.Status.RUNNING)
    Step.objects.create(run=run, step_id="third", agent="a", position=3, status=Step.Status.SKIPPED)
    idle = make_run(relay, owner)
    client.force_login(owner)

    page = client.get("/").content.decode()

    row = re.search(rf'<tr id="run-{run.pk}".*?</tr>', page, re.S).group(0)
    # Skipped is not done: the bar and the count hold only the completed step.
    assert '<progress max="3" value="1"></progress>' in row
    assert '1/3 steps completed, <span class="step-count status-skipped">1 skipped</span>' in row
    assert 'class="status status-running"' in row
    idle_row = re.search(rf'<tr id="run-{idle.pk}".*?</tr>', page, re.S).group(0)
    assert "no steps yet" in idle_row and "<progress" not in idle_row


def test_it_says_a_run_awaiting_approval_has_not_started(client, owner, relay):
    run = make_run(relay, owner, status=Run.Status.AWAITING_APPROVAL)
    client.force_login(owner)

    row = re.search(rf'<tr id="run-{run.pk}".*?</tr>', client.get("/").content.decode(), re.S).group(0)

    assert re.search(r'<td class="run-progress">(.*?)</td>', row, re.S)[1].strip() == "not started: awaiting approval"
    assert "0/0" not in row


def test_it_pages_and_keeps_the_filters_in_pager_links(client, owner, relay):
    Run.objects.bulk_create(
        [Run(workflow=relay, created_by=owner, status=Run.Status.FAILED, command=f"c{n}") for n in range(60)]
    )
    make_run(relay, owner, status=Run.Status.COMPLETED)
    client.force_login(owner)

    page = client.get("/", {"status": "failed", "q": "c"}).content.decode()

    assert len(re.findall(r'<tr id="run-', page)) == 50
    assert "page 1 of 2" in page
    assert 'href="?status=failed&amp;q=c&amp;page=2"' in page
    assert len(listed(client, status="failed", q="c", page=2)) == 10


@pytest.mark.parametrize("who", ["owner", "staff"])
def test_its_query_count_does_not_grow_with_runs(client, owner, staff, relay, xss, who, django_assert_max_num_queries):
    runs = Run.objects.bulk_create(
        [Run(workflow=relay if n % 2 else xss, created_by=owner, command=f"run {n}") for n in range(60)]
    )
    Step.objects.bulk_create(
        [Step(run=run, step_id=f"s{i}", agent="a", position=i, status="completed") for run in runs for i in range(3)]
    )
    client.force_login(owner if who == "owner" else staff)

    # session, user, count, page, progress, workflows, usernames (staff), permissions (two, for the menu),
    # the person's runs waiting for approval (the "what to do next" card)
    with django_assert_max_num_queries(10):
        page = client.get("/", {"status": "pending", "workflow": "relay", "q": "run"})
    # session, user, count, page, progress, and permissions (two: an approver sees more runs)
    with django_assert_max_num_queries(7):
        rows = client.get("/", headers=HTMX)

    assert page.content.decode().count("<progress") == 30
    assert rows.content.decode().count('<progress max="3" value="3">') == 50


def test_it_polls_its_own_url_for_the_rows(client, owner, relay):
    run = make_run(relay, owner, status=Run.Status.RUNNING)
    client.force_login(owner)

    page = client.get("/", {"status": "running", "q": "x"}).content.decode()

    assert '<tbody id="run-rows" hx-get="/?status=running&amp;q=x" hx-trigger="every 3s" hx-swap="innerHTML">' in page

    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    response = client.get("/", {"status": "completed"}, headers=HTMX)
    rows = response.content.decode()

    assert rows.lstrip().startswith(f'<tr id="run-{run.pk}" data-status="completed">')
    for outside in ("<html", "<form", "<tbody", "<thead", "Start a run"):
        assert outside not in rows
    assert "HX-Request" in response["Vary"]
