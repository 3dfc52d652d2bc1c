"""The messaging tools: send_message for steps; forward_to_agent, narrate and
finalize for the coordinator. Result texts match zenflow's."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.events import Event
from agents.events.run_events import CoordinatorMessage, CoordinatorNarration, CoordinatorSynthesis
from agents.router import COORDINATOR, DropReason
from agents.router.messages import SendResult
from agents.tools.base import Tool, ToolContext
from agents.tools.builtin.result_models import Done, DoneResult, MessageOutcome, MessageResult
from agents.tools.results import ToolAnswer

MAX_MESSAGE_CHARS = 32_000
# The one tool by which a step routes a message.
SEND_MESSAGE = "send_message"


class _StrictArgs(BaseModel):
    # An argument the tool does not take is a mistake worth telling the model.
    model_config = ConfigDict(extra="forbid")


class SendMessageArgs(_StrictArgs):
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="What to tell the coordinator.")


class ForwardArgs(_StrictArgs):
    target_step_id: str = Field(description="The step id (from the workflow, not the agent name).")
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    kind: str = Field(
        default="info",
        description="info, context_update or cancel; anything else is treated as info.",
    )


class NarrateArgs(_StrictArgs):
    text: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="A note for the people watching the run.")


class FinalizeArgs(_StrictArgs):
    summary: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description="The run's final summary.")


def _outcome(sent: SendResult) -> ToolAnswer:
    outcome = MessageOutcome(
        status=sent.status,
        message_id=sent.message_id or None,
        reason=str(sent.reason) if sent.reason else None,
        detail=sent.detail or None,
    )
    return ToolAnswer(outcome.model_dump(exclude_none=True))


def _send_message(ctx: ToolContext, args: SendMessageArgs) -> ToolAnswer:
    return _outcome(ctx.router.send(ctx.step_id, args.text))


def _forward(ctx: ToolContext, args: ForwardArgs) -> ToolAnswer:
    result = ctx.router.forward(args.target_step_id, args.text, args.kind)
    if result.status == "queued":
        forwarded = CoordinatorMessage(to=args.target_step_id, message_id=result.message_id, text=args.text)
        ctx.sink.emit(Event.of(forwarded, COORDINATOR))
    return _outcome(result)


def _narrate(ctx: ToolContext, args: NarrateArgs) -> ToolAnswer:
    ctx.sink.emit(Event.of(CoordinatorNarration(text=args.text), COORDINATOR))
    return ToolAnswer(Done(status="narrated").model_dump())


def _finalize(ctx: ToolContext, args: FinalizeArgs) -> ToolAnswer:
    # Idempotent: calling it again replaces the summary; the last one wins.
    ctx.finalized.append(args.summary)
    # Whatever steps send from now on has no one to read it.
    ctx.router.close(COORDINATOR, DropReason.MAILBOX_CLOSED_BY_FINALIZE)
    ctx.sink.emit(Event.of(CoordinatorSynthesis(summary=args.summary), COORDINATOR))
    return ToolAnswer(Done(status="finalized").model_dump())


MESSAGING_TOOLS = (
    Tool(
        SEND_MESSAGE,
        "Send a message to the coordinator. It decides whether to forward it to another step.",
        SendMessageArgs,
        frozenset({"step"}),
        _send_message,
        toolset="messaging",
        inline=True,
        held=True,
        tags=("bookkeeping",),
        result_model=MessageResult,
    ),
    Tool(
        "forward_to_agent",
        "Forward a message to one step of this run, addressed by its step id.",
        ForwardArgs,
        frozenset({"coordinator"}),
        _forward,
        toolset="messaging",
        inline=True,
        held=True,
        tags=("bookkeeping",),
        result_model=MessageResult,
    ),
    Tool(
        "narrate",
        "Tell the people watching the run what is happening.",
        NarrateArgs,
        frozenset({"coordinator"}),
        _narrate,
        toolset="messaging",
        inline=True,
        held=True,
        tags=("bookkeeping",),
        result_model=DoneResult,
    ),
    Tool(
        "finalize",
        "Write the run's final summary. Calling it again replaces the summary.",
        FinalizeArgs,
        frozenset({"coordinator"}),
        _finalize,
        toolset="messaging",
        inline=True,
        held=True,
        tags=("bookkeeping", "terminal"),
        result_model=DoneResult,
    ),
)
