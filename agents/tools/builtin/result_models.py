"""What the builtin tools that answer data send the model, as pydantic
models: each is its tool's ``result_model`` and so its ``result.schema``
in tool_schemas.json. A bounded tool's answer reaches the model as
``{"result": ..., "bounds": ...}`` (ToolAnswer.model_text), and its model
says so, bounds included."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.results import Bounds


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
