"""Answers a model should not give, recorded as the model's to fix: an
empty answer gets a hint (then fails), each call of a batch its own error,
a turn past the step's call cap runs nothing, and a coordinator's finalize
is refused without workers (coordinator.requireWorkers) or with no result.
No database: an in-memory router and event list."""

from __future__ import annotations

import json
from contextlib import nullcontext

from agents.events import ListSink
from agents.llm.base import Completion, ToolCallRequest
from agents.router import COORDINATOR, InMemoryMailboxStore, MessageRouter
from agents.runner import (
    EMPTY_ANSWER,
    EMPTY_FINALIZE,
    AgentSession,
    ToolEnv,
    TurnResult,
    apply_completion,
    build_request,
    run_side_effects,
)
from agents.spec import AgentSpec
from agents.tools import default_registry

REGISTRY = default_registry()


class Turns:
    """One agent's turns, each answered with a given Completion."""

    def __init__(self, role: str = "step", *, env: ToolEnv | None = None, retries: int | None = 2) -> None:
        step_id = COORDINATOR if role == "coordinator" else "s1"
        self.sink = ListSink()
        self.store = InMemoryMailboxStore()
        self.router = MessageRouter(self.store, self.sink)
        self.router.register("s1")
        transcript = [{"role": "system", "content": "You work."}, {"role": "user", "content": "Do it."}]
        self.turn = AgentSession("run-1", step_id, step_id, AgentSpec(), role, transcript, env=env)  # type: ignore[arg-type]
        self.turn.empty_answer_retries = retries
        self.tools = REGISTRY.for_role(role, ["spawn_worker"] if role == "coordinator" else ["write_file"])  # type: ignore[arg-type]

    def answer(self, completion: Completion) -> TurnResult:
        request = build_request(self.turn, self.tools, [])
        result = apply_completion(
            self.turn, request, completion, [], router=self.router, registry=REGISTRY, tools=self.tools
        )
        self.turn.transcript = result.transcript
        return result


def calls(*specs: tuple[str, dict | str]) -> Completion:
    return Completion(
        content=None,
        tool_calls=[
            ToolCallRequest(f"call-{n}", name, args if isinstance(args, str) else json.dumps(args))
            for n, (name, args) in enumerate(specs, 1)
        ],
    )


def test_an_empty_answer_gets_a_hint_until_the_cap_then_fails():
    turns = Turns()

    first = turns.answer(Completion(content=None))
    second = turns.answer(Completion(content=" \n\t"))
    third = turns.answer(Completion(content=""))

    assert (first.status, second.status) == ("continue", "continue")
    assert first.transcript[-2] == {"role": "assistant", "content": ""}
    hint = first.transcript[-1]
    assert hint["role"] == "user" and hint["content"].startswith("Your answer was empty: no text and no tool call.")
    assert "Retry 1 of 2" in hint["content"] and "Retry 2 of 2" in second.transcript[-1]["content"]
    assert (third.status, third.error) == ("failed", EMPTY_ANSWER)
    assert [e.data["empty_answer"] for e in turns.sink.events if e.type == "agent_turn"] == [1, 2, 3]


def test_a_real_answer_between_empty_ones_starts_the_count_again():
    turns = Turns(retries=1)

    turns.answer(Completion(content=""))
    turns.answer(calls(("send_message", {"text": "working on it"})))
    after = turns.answer(Completion(content=""))

    assert after.status == "continue"


def test_an_empty_answer_is_a_plain_answer_where_nothing_is_expected():
    turns = Turns("coordinator", retries=None)

    result = turns.answer(Completion(content=""))

    assert (result.status, result.output) == ("completed", "")


def test_each_bad_call_of_a_batch_gets_its_own_error_keyed_by_its_id():
    turns = Turns()

    result = turns.answer(
        calls(("send_message", {"message": "x"}), ("nope", {}), ("send_message", "[1]"), ("send_message", {"text": ""}))
    )

    assert result.status == "continue"
    answers = result.transcript[-4:]
    assert [m["tool_call_id"] for m in answers] == ["call-1", "call-2", "call-3", "call-4"]
    assert all(m["content"].startswith("error: ") and "\nretry_hint: " in m["content"] for m in answers)
    assert not any(call.ok for call in result.tool_calls)


def test_a_turn_asking_for_more_calls_than_are_left_runs_none_of_them():
    turns = Turns(env=ToolEnv(tool_call_cap=3, tool_calls_made=2))

    result = turns.answer(
        calls(
            ("write_file", {"path": "a", "content": "1"}),
            ("write_file", {"path": "b", "content": "2"}),
            ("send_message", {"text": "hi"}),  # bookkeeping: not counted, but not run either
        )
    )

    assert result.over_call_cap and not result.call_cap_exhausted
    expected = (
        "error: this turn asks for 2 tool calls and the step has 1 of 3 left (maxToolCalls); "
        "none of them ran: ask for at most 1"
    )
    assert [m["content"].split("\n")[0] for m in result.transcript[-3:]] == [expected] * 3
    assert not {"message_sent", "message_dropped"} & set(turns.sink.types())
    assert not any(call.outcome.counted for call in result.tool_calls)


def test_a_turn_asking_for_more_calls_than_a_turn_may_make_runs_none_of_them_bookkeeping_included():
    # No call cap counts messages or claims; one answer still may not ask
    # for hundreds of them (a row and events each).
    turns = Turns(env=ToolEnv(tool_call_cap=200, tool_calls_made=0))
    asked = [("send_message", {"text": f"note {n}"}) for n in range(101)]

    too_many = turns.answer(calls(*asked))
    refusals = {m["content"].split("\n")[0] for m in too_many.transcript[-101:]}
    enough = turns.answer(calls(*asked[:100]))

    assert too_many.over_call_cap and not too_many.call_cap_exhausted
    expected = (
        "error: this turn asks for 101 tool calls and a turn may make at most 100, messages and claims "
        "included; none of them ran: ask for at most 100"
    )
    assert refusals == {expected}
    assert not enough.over_call_cap
    assert turns.sink.types().count("message_sent") == 100


def test_side_effects_of_a_turn_past_the_call_cap_do_not_run():
    began: list[str] = []

    class Journal:
        def get(self, key):
            return None

        def begin(self, key, name):
            began.append(name)

        def finish(self, key, outcome):
            pass

    turns = Turns(env=ToolEnv(tool_call_cap=1, tool_calls_made=1))
    completion = calls(("write_file", {"path": "a", "content": "1"}))

    ran = run_side_effects(turns.turn, completion, registry=REGISTRY, tools=turns.tools, journal=Journal())

    assert (ran, began) == (0, [])
    assert turns.answer(completion).call_cap_exhausted


class Host:
    """spawn_worker's run store: hands out worker ids."""

    def __init__(self) -> None:
        self.spawned = 0

    def isolated(self, *, held=False):
        return nullcontext()

    def spawn_worker(self, ctx, request) -> str:
        self.spawned += 1
        return f"worker-{self.spawned}"


def test_a_coordinator_that_must_plan_workers_cannot_finalize_without_one():
    turns = Turns("coordinator", env=ToolEnv(host=Host(), require_workers=True))

    refused = turns.answer(calls(("finalize", {"summary": "nothing to do"})))

    assert (refused.status, refused.finalized) == ("continue", None)
    text = refused.transcript[-1]["content"]
    assert text.startswith("error: finalize refused: this workflow's coordinator must plan the work with spawn_worker")
    hint = json.loads(text.split("\nretry_hint: ")[1])
    assert (hint["kind"], hint["action"]) == ("domain_rejection", "replan")
    # A worker spawned earlier in the same turn counts; but it has yet to
    # run, so the finalize waits for the wake that brings its result.
    planned = turns.answer(calls(("spawn_worker", {"task": "work"}), ("finalize", {"summary": "planned and done"})))
    assert planned.finalized is None
    waits = planned.transcript[-1]["content"]
    assert waits.startswith("error: finalize refused: workers spawned in this wake have not run yet (1)")
    assert "you are woken with their results once they finish" in waits
    later = Turns("coordinator", env=ToolEnv(host=Host(), require_workers=True, workers=1))
    assert later.answer(calls(("finalize", {"summary": "planned and done"}))).finalized == "planned and done"


def test_a_finalize_with_an_empty_result_fails_the_turn():
    turns = Turns("coordinator")

    result = turns.answer(calls(("finalize", {"summary": "   "})))

    assert (result.status, result.error, result.finalized) == ("failed", EMPTY_FINALIZE, None)
    assert "coordinator_synthesis" not in turns.sink.types()
