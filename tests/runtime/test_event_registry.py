"""The event registry: one pydantic model per event type, checked on emit."""

from __future__ import annotations

from typing import get_args

import pytest

from agents.events import EVENT_TYPES, REGISTRY, Event, EventDataError, EventType, ListSink
from agents.events.registry import PAYLOADS, type_of


def test_every_event_type_has_exactly_one_model():
    assert set(REGISTRY) == set(get_args(EventType)) == set(EVENT_TYPES)
    assert len(PAYLOADS) == len(EVENT_TYPES)


@pytest.mark.parametrize("type_", EVENT_TYPES)
def test_each_model_names_its_type_as_a_literal(type_):
    model = REGISTRY[type_]
    assert type_of(model) == type_
    assert get_args(model.model_fields["type"].annotation) == (type_,)


def test_an_event_keeps_its_data_as_emitted():
    data = {"message_id": "m1", "from": "a", "to": "b", "msg_type": "info", "content": "hi"}

    event = Event("message_sent", "a", data)

    assert event.data == data  # "from" stays "from", nothing added


def test_an_event_with_a_missing_field_names_its_type_and_the_field():
    with pytest.raises(EventDataError, match=r"step_start event data does not fit StepStart: agent: Field required"):
        Event("step_start", "s1", {})


def test_an_event_with_a_field_of_the_wrong_type_names_it():
    with pytest.raises(EventDataError, match=r"agent_idle event data .*cycle: Input should be a valid integer"):
        Event("agent_idle", "coordinator", {"cycle": "often"})


def test_an_event_with_a_field_its_model_does_not_know_is_refused():
    with pytest.raises(EventDataError, match=r"coordinator_narration event data .*txt: Extra inputs are not permitted"):
        Event("coordinator_narration", "coordinator", {"txt": "a typo"})


def test_an_unknown_event_type_is_refused():
    with pytest.raises(EventDataError, match="unknown event type 'step_begun'"):
        Event("step_begun", "s1", {})  # type: ignore[arg-type]


def test_a_sink_only_ever_sees_checked_events():
    sink = ListSink()
    with pytest.raises(EventDataError):
        sink.emit(Event("error", "", {"error": None}))

    assert sink.events == []


def test_a_message_event_names_its_sender_from_as_stored():
    with pytest.raises(EventDataError, match="from: Field required"):
        Event(
            "message_dropped",
            "a",
            {"reason": "unknown-step", "sender": "a", "to": "b", "msg_type": "info", "message_id": "m1"},
        )


def test_an_event_made_from_its_model_stores_what_the_dict_form_stored():
    from agents.events.run_events import MessageSent, StepEnd, WorkflowStart

    made = Event.of(MessageSent(message_id="m1", sender="a", to="b", msg_type="info", content="hi"), "a")
    as_dict = Event(
        "message_sent", "a", {"message_id": "m1", "from": "a", "to": "b", "msg_type": "info", "content": "hi"}
    )
    assert (made.type, made.step_id, made.data) == (as_dict.type, as_dict.step_id, as_dict.data)

    # Only the fields it was made with: an optional one left out is not stored as null.
    start = Event.of(WorkflowStart(workflow="w", version=1, inputs={}, steps=["a"]))
    assert start.data == {"workflow": "w", "version": 1, "inputs": {}, "steps": ["a"]}
    assert Event.of(StepEnd(status="completed", output="done"), "s1").data == {"status": "completed", "output": "done"}


def test_a_model_with_a_wrong_field_fails_where_it_is_made():
    from pydantic import ValidationError

    from agents.events.run_events import AgentIdle

    with pytest.raises(ValidationError, match="cycle"):
        AgentIdle(cycle="often")


def test_a_stored_row_reads_back_as_its_model():
    from agents.events import parse
    from agents.events.run_events import MessageDropped, StepEnd

    dropped = parse(
        "message_dropped", {"reason": "unknown-step", "from": "a", "to": "b", "msg_type": "info", "message_id": "m1"}
    )
    assert isinstance(dropped, MessageDropped)
    assert (dropped.sender, dropped.to, dropped.reason) == ("a", "b", "unknown-step")
    assert Event("step_end", "s1", {"status": "failed", "output": ""}).payload == StepEnd(status="failed", output="")


def test_a_stored_row_that_does_not_fit_its_model_is_a_clear_error():
    from agents.events import parse

    with pytest.raises(EventDataError, match="step_end event data does not fit StepEnd: output: Field required"):
        parse("step_end", {"status": "completed"})
    with pytest.raises(EventDataError, match="unknown event type 'step_begun'"):
        parse("step_begun", {})
    with pytest.raises(EventDataError, match="from: Field required"):
        parse("agent_inbox_drain", {"message_id": "m1", "sender": "a", "msg_type": "info"})
