"""spawn_worker's arguments (agents/tools/spawn.py): what the coordinator
asks of a worker. Its own module: the tool host (agents/tools/base.py
ToolHost) takes one too, and the tool is declared above the host."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_TASK_CHARS = 8_000


class WorkerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS, description="What the worker must do, in full.")
    tools: list[str] = Field(default_factory=list, description="Worker tools it may use (execution tools only).")
    depends_on: list[str] = Field(default_factory=list, description="Step ids whose output it needs first.")
    writes: list[str] = Field(
        default_factory=list,
        description="What it will write (file paths, records); two unfinished workers may not share one.",
    )
    agent: str | None = Field(default=None, description="The workflow agent to run it as (default: the worker agent).")
