"""record_claim: an agent states a claim and the source that backs it.

Claims are what a run tells people it found. url and source_ref
may be left out here, so a model is not stopped mid-turn, but a run whose
claims lack either is reported ``blocked`` with ``requires_retry``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.base import Tool, ToolContext
from agents.tools.builtin.result_models import ClaimRecorded, RecordClaimResult
from agents.tools.results import ToolAnswer


class ClaimArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claim: str = Field(min_length=1, max_length=2000, description="The statement, e.g. 'Aster Swift 14 @ $849'.")
    confidence: float = Field(ge=0, le=1, description="How sure you are, 0 to 1.")
    url: str | None = Field(default=None, max_length=2000, description="The source's URL.")
    source_ref: str | None = Field(default=None, max_length=500, description="The source's id (search: source_ref).")
    source_name: str = Field(default="", max_length=200)
    source_domain: str = Field(default="", max_length=200)
    title: str | None = Field(default=None, max_length=500)
    source_type: str = Field(default="web", max_length=40)
    ttl: str | None = Field(default=None, description="How long the claim holds: 30m, 24h, 7d or seconds.")


def _record(ctx: ToolContext, args: ClaimArgs) -> ToolAnswer:
    claim_id = ctx.require_host().record_claim(ctx, args.model_dump())
    missing = [name for name in ("url", "source_ref") if not getattr(args, name)]
    return ToolAnswer(ClaimRecorded.model_validate({"claim_id": claim_id, "missing": missing}).model_dump())


RECORD_CLAIM = Tool(
    "record_claim",
    "Record a claim your result makes, with its source (url and source_ref). People see claims with links.",
    ClaimArgs,
    frozenset({"step", "coordinator"}),
    _record,
    toolset="claims",
    inline=True,
    tags=("bookkeeping",),
    result_model=RecordClaimResult,
)
