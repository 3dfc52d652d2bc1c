"""One step-agent turn, and one coordinator wake round.

A turn is split in two so that no database transaction is held open while a
model thinks: ``step_request`` builds what to ask the model, the caller asks
it, and ``apply_step_completion`` records the answer (drains the inbox, runs
the tool calls, emits events). zenweb runs the second half in one
transaction, so a turn either happened entirely or not at all; a turn that
crashed before committing is simply asked again.

The package: ``turn`` (what a turn is given and gives back), ``prompts``
(what the model is asked), ``answer_checks`` (empty answers, the call cap, a
refused finalize), ``tool_calls`` (their contexts; the calls with effects run
first) and ``completion`` (``apply_completion``). Import from
``agents.runner``: these are its public names.
"""

from __future__ import annotations

from agents.router import COORDINATOR
from agents.runner.answer_checks import (
    EMPTY_ANSWER,
    EMPTY_FINALIZE,
    FINALIZE,
    SPAWN_WORKER,
    empty_answer_hint,
    is_empty,
)
from agents.runner.completion import apply_completion
from agents.runner.prompts import (
    MAX_DEPENDENCY_CHARS,
    MAX_PROMPT_CHARS,
    PREVIEW_CHARS,
    TRUNCATION_MARKER,
    build_request,
    inbox_text,
    new_step_transcript,
    step_prompt,
    step_system_prompt,
)
from agents.runner.tool_calls import run_side_effects
from agents.runner.turn import (
    AgentSession,
    AgentTurn,
    JournalWriter,
    ToolCallRecord,
    ToolEnv,
    TurnResult,
)

__all__ = [
    "COORDINATOR",
    "EMPTY_ANSWER",
    "EMPTY_FINALIZE",
    "FINALIZE",
    "MAX_DEPENDENCY_CHARS",
    "MAX_PROMPT_CHARS",
    "PREVIEW_CHARS",
    "SPAWN_WORKER",
    "TRUNCATION_MARKER",
    "AgentSession",
    "AgentTurn",
    "JournalWriter",
    "ToolCallRecord",
    "ToolEnv",
    "TurnResult",
    "apply_completion",
    "build_request",
    "empty_answer_hint",
    "inbox_text",
    "is_empty",
    "new_step_transcript",
    "run_side_effects",
    "step_prompt",
    "step_system_prompt",
]
