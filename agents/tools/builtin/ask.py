"""ask_person: a step asks a person a question and waits for the answer.

The call is stored waiting, with a pending question (an Approval of kind
``question``, runs/actions/questions.py) that the run page, the approvals
queue and the API show; the step pauses until it is answered or its wait
times out (ZENWEB_ASK_PERSON_TIMEOUT), and then reads the result as
``AskPersonResult``. What the model writes here is untrusted text: its
size is capped here and it is escaped wherever it is shown."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents.tools.base import Tool, ToolContext
from agents.tools.results import ToolAnswer

MAX_QUESTION_CHARS = 2_000
MAX_OPTIONS = 10
MAX_OPTION_CHARS = 200
# The longest answer a person may give (agents/core/questions.py refuses longer).
MAX_ANSWER_CHARS = 4_000

Option = Annotated[str, Field(min_length=1, max_length=MAX_OPTION_CHARS)]


class AskPersonArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(
        min_length=1, max_length=MAX_QUESTION_CHARS, description="What you need a person to tell you, in full."
    )
    options: list[Option] = Field(
        default_factory=list,
        max_length=MAX_OPTIONS,
        description="The answers to choose from; leave out for a free-text answer.",
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, question: str) -> str:
        if not question.strip():
            raise ValueError("the question is blank")
        return question.strip()

    @field_validator("options")
    @classmethod
    def _distinct(cls, options: list[str]) -> list[str]:
        stripped = [option.strip() for option in options]
        if any(not option for option in stripped):
            raise ValueError("an option is blank")
        if len(set(stripped)) != len(stripped):
            raise ValueError("options repeat one another")
        return stripped


class AskPersonResult(BaseModel):
    """What the person answered, or that no answer came and why."""

    model_config = ConfigDict(extra="forbid")

    answered: bool = Field(description="Whether a person answered.")
    answer: str | None = Field(default=None, max_length=MAX_ANSWER_CHARS, description="The answer, as given.")
    answered_by: str | None = Field(default=None, description="Who answered.")
    reason: str | None = Field(default=None, description="Why no answer came (the wait timed out, the run ended).")


def _ask(ctx: ToolContext, args: AskPersonArgs) -> ToolAnswer:
    question_id = ctx.require_host().ask_person(ctx, args.question, args.options)
    return ToolAnswer(
        f"waiting for a person to answer question {question_id}; the answer replaces this text",
        pending=True,
        approval_id=question_id,
    )


ASK_PERSON = Tool(
    "ask_person",
    "Ask a person a question and wait for the answer (give options to offer a choice). Use it when "
    "only a person can decide or knows: the step pauses until they answer or the wait times out.",
    AskPersonArgs,
    frozenset({"step"}),
    _ask,
    toolset="people",
    result_model=AskPersonResult,
    inline=True,
)
