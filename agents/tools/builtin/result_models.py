"""What each builtin tool sends the model, as pydantic models: each is its
tool's ``result_model`` and so its ``result.schema`` in tool_schemas.json.
An answer reaches the model as ``{"result": ...}``, a bounded tool's as
``{"result": ..., "bounds": ...}`` (ToolAnswer.model_text), and its model
says so, bounds included. The registry checks every answer against its
tool's model before the model sees it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.results import Bounds

# run_shell's output cap, and room for the line that says what was cut
# from the middle past it. The output reaches the model as a JSON string,
# where a newline or a quote takes two characters: the cap leaves room for
# that under the registry's result cap (MAX_RESULT_CHARS, 16,000), so the
# model sees the output rather than a preview.
MAX_OUTPUT_CHARS = 12_000
MAX_SHELL_OUTPUT = MAX_OUTPUT_CHARS + 120


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FilePage(_Result):
    path: str = Field(description="The file, relative to the workspace.")
    first_line: int = Field(ge=1, description="The number of the first line given.")
    lines: list[str]


class ReadFileResult(_Result):
    """Lines of one file, and where to continue."""

    result: FilePage
    bounds: Bounds


class GlobResult(_Result):
    """Workspace paths matching the pattern (folders end with /), a page at a time."""

    result: list[str]
    bounds: Bounds


class GrepResult(_Result):
    """Matching lines as ``path:line: text``, a page at a time."""

    result: list[str]
    bounds: Bounds


class SearchFinding(_Result):
    source_ref: str = Field(description="The document's id: cite it, or pass it to price_history.")
    title: str
    url: str
    source_name: str
    source_domain: str
    source_type: str
    published: str = Field(description="ISO date.")
    snippet: str
    price_usd: int | float | None = Field(default=None, ge=0, description="The latest price, when tracked.")


class SearchContent(_Result):
    query: str
    max_price_usd: int | float | None = Field(default=None, ge=0, description="Read from 'under $N' in the query.")
    findings: list[SearchFinding]


class SearchResult(_Result):
    """Findings with full source metadata, a page at a time."""

    result: SearchContent
    bounds: Bounds


# The tools that act answer what they did, as data too: the model and the
# run page read the same object, ``{"result": ...}``.


class MessageOutcome(_Result):
    status: Literal["queued", "dropped", "rejected"] = Field(
        description="queued: it will be delivered; dropped: it never will (reason says why); "
        "rejected: nothing was sent (detail says what to do instead)."
    )
    message_id: str | None = Field(default=None, description="The message's id, when one was given.")
    reason: str | None = Field(default=None, description="Why it was dropped (mailbox-closed-by-finalize, ...).")
    detail: str | None = Field(default=None, max_length=4_000)


class MessageResult(_Result):
    """What became of the message: send_message and forward_to_agent."""

    result: MessageOutcome


class Done(_Result):
    status: Literal["narrated", "finalized"]


class DoneResult(_Result):
    """That the note was shown (narrate) or the summary kept (finalize)."""

    result: Done


class SpawnedWorker(_Result):
    step_id: str = Field(description="The new worker step's id.")
    depends_on: list[str] = Field(default_factory=list, description="The steps it starts after.")


class SpawnWorkerResult(_Result):
    """The worker step added to the run."""

    result: SpawnedWorker


class ChildRunAnswer(_Result):
    run_id: int = Field(description="The child run the call started.")
    workflow: str = Field(description="The workflow it ran.")
    summary: str = Field(description="The child run's final result.")


class WorkflowToolResult(_Result):
    """A workflow called as a tool: its child run, once completed, and that run's result."""

    result: ChildRunAnswer


class FileWritten(_Result):
    path: str = Field(description="The file, relative to the workspace.")
    action: Literal["created", "overwrote", "edited"]
    bytes: int = Field(ge=0, description="The file's size now, in bytes (UTF-8).")


class FileWriteResult(_Result):
    """The file written (write_file) or edited once (edit_file)."""

    result: FileWritten


class ShellRun(_Result):
    exit_code: int = Field(description="The command's exit status (negative: killed by that signal).")
    note: str | None = Field(default=None, description="Why it may have stopped: a signal, the workspace quota.")
    output: str = Field(
        max_length=MAX_SHELL_OUTPUT,
        description="stdout and stderr combined; past the cap, the start and the end with the middle left out.",
    )


class RunShellResult(_Result):
    """How the command ended and what it printed."""

    result: ShellRun


class PricePoint(_Result):
    date: str = Field(description="ISO date.")
    price_usd: int | float = Field(ge=0)


class PriceHistory(_Result):
    document_id: str
    title: str
    source_name: str
    url: str
    tracked: int = Field(ge=1, description="How many prices are tracked (drawn as a chart for people).")
    first: PricePoint
    latest: PricePoint
    lowest: PricePoint
    highest: PricePoint


class PriceHistoryResult(_Result):
    """One document's tracked prices, summarized."""

    result: PriceHistory


class ClaimRecorded(_Result):
    claim_id: str
    missing: list[Literal["url", "source_ref"]] = Field(
        default_factory=list, max_length=2, description="Sources the claim lacks: the result will need a retry."
    )


class RecordClaimResult(_Result):
    """The claim's id, and what source it lacks."""

    result: ClaimRecorded
