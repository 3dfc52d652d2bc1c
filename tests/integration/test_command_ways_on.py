"""A command that started nothing offers a way on (HTTP level; the browser
test clicks them): its clarification options are buttons that send it again
with that workflow chosen, the inputs it lacks are fields, a workflow refused
for its mode is offered in the mode it runs in."""

from __future__ import annotations

import pytest

from runs.models import Command, Run
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

AMBIGUOUS = "find laptops under $1000 and write a buying guide"


@pytest.fixture
def catalog():
    for name in ("research", "research_brief", "regions_foreach", "code_edit"):
        register(name)


def answer(client, text: str, **fields) -> tuple[Command, str]:
    """Send ``text`` from the command box; the command and its page."""
    client.post("/commands/", {"command": text, "mode": "chat"} | fields)
    command = Command.objects.latest("pk")
    return command, client.get(f"/commands/{command.pk}/").content.decode()


def test_a_clarification_option_is_a_button_that_starts_the_chosen_workflow(catalog, client, owner):
    client.force_login(owner)
    command, html = answer(client, AMBIGUOUS)
    assert command.status == "needs_clarification"
    assert 'data-workflow="research"' in html and 'data-workflow="research_brief"' in html

    response = client.post("/commands/", {"command": AMBIGUOUS, "mode": "chat", "workflow": "research_brief"})

    run = Run.objects.get()
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.workflow.name == "research_brief"
    assert run.inputs == {"query": AMBIGUOUS}


def test_a_missing_input_is_a_field_and_the_workflow_starts_with_what_is_given(catalog, client, owner):
    client.force_login(owner)
    command, html = answer(client, "Run research workflow for")
    assert command.status == "needs_more_info"
    assert 'name="input-query"' in html and "What to research." in html

    response = client.post(f"/commands/{command.pk}/inputs/", {"input-query": "tents under <b>$200</b>"})

    run = Run.objects.get()
    assert response["Location"] == f"/runs/{run.pk}/"
    assert (run.workflow.name, run.inputs) == ("research", {"query": "tents under <b>$200</b>"})
    assert run.command == "Run research workflow for query=tents under <b>$200</b>"


def test_an_unclear_list_input_is_a_field_whose_comma_separated_items_are_its_items(catalog, client, owner):
    client.force_login(owner)
    command, html = answer(client, "deploy regions to eu or us")
    assert command.status == "needs_clarification" and 'name="input-regions"' in html
    assert 'id="clarification-options"' not in html  # the same workflow again would ask again

    client.post(f"/commands/{command.pk}/inputs/", {"input-regions": "eu, us"})

    # As a command that names them plainly gives them (a loop's items, comma-separated).
    assert Run.objects.get().inputs["regions"] == "eu,us"


def test_an_empty_field_is_refused_by_name(catalog, client, owner):
    client.force_login(owner)
    command, _ = answer(client, "Run research workflow for")

    page = client.post(f"/commands/{command.pk}/inputs/", {"input-query": "  "}, follow=True).content.decode()

    assert "inputs: give a value for query" in page
    assert not Run.objects.exists()


def test_a_workflow_refused_for_its_mode_is_offered_in_the_mode_it_runs_in(catalog, client, owner):
    client.force_login(owner)
    command, html = answer(client, "Run code_edit for path=a.txt")
    assert command.status == "blocked"
    assert 'id="other-mode"' in html and ">Run it in code mode</button>" in html

    client.post("/commands/", {"command": command.text, "mode": "code", "workflow": "code_edit"})

    run = Run.objects.get()
    assert (run.workflow.name, run.mode, run.inputs["path"]) == ("code_edit", "code", "a.txt")


def test_the_command_is_sent_again_escaped(catalog, client, owner):
    client.force_login(owner)
    _, html = answer(client, 'find "<script>x</script>" and write a buying guide')

    assert 'value="find &quot;&lt;script&gt;x&lt;/script&gt;&quot; and write a buying guide"' in html
    assert "<script>x" not in html


def test_someone_elses_command_takes_no_inputs(catalog, client, owner, teammate):
    client.force_login(owner)
    command, _ = answer(client, "Run research workflow for")

    client.force_login(teammate)
    assert client.post(f"/commands/{command.pk}/inputs/", {"input-query": "x"}).status_code == 404
    assert not Run.objects.exists()


def test_an_unknown_chosen_workflow_is_answered_not_started(catalog, client, owner):
    client.force_login(owner)

    command, html = answer(client, AMBIGUOUS, workflow="no_such")

    assert (command.status, command.result["error"]) == ("error", "Unknown workflow: no_such")
    assert not Run.objects.exists()
