"""The workflow handler (docs/commands-and-approvals.md): a command in plain words becomes one workflow run.

The Executor says what it wants ("Run research workflow for laptops under $1000");
the handler shows a model the workflow catalog and asks for a COORDINATOR_SELECTION
(``selection_request``, ``parse_selection``), then checks that selection against the
catalog, the current mode and the workflow's inputs (``decide``). Whatever the run
or the check produced comes back as a COORDINATOR_RESULT, which the Orchestrator
appends to the Executor's notes with ``CoordinatorResult.to_markdown``.

The model only proposes: a workflow it invents, a code-mode workflow in chat mode,
or arguments of the wrong type never start a run.

The package follows that flow: ``shapes`` (the selection, result and
claims), ``catalog`` (what the model is told of each workflow), ``selection``
(the request and the reading of its answer), ``decision`` (the checks and the
result). Import from ``agents.handler``: these are its public names.
"""

from __future__ import annotations

from agents.handler.catalog import (
    MODES,
    CatalogEntry,
    mode_refusal,
)
from agents.handler.decision import (
    MAX_CLARIFICATION_OPTIONS,
    MISSING_SOURCES,
    TIMED_OUT,
    Decision,
    claims_problem,
    decide,
    error_for_run,
)
from agents.handler.selection import (
    AGENT,
    DEFAULT_BUDGET_TOKENS,
    TEMPERATURE,
    SelectionPlan,
    parse_selection,
    plan_selection,
    selection_request,
)
from agents.handler.shapes import (
    FINAL_STATUSES,
    Claim,
    ClarificationOption,
    CommandContext,
    CoordinatorResult,
    CoordinatorSelection,
    Finding,
    ResultStatus,
    SelectionError,
    SelectionStatus,
    SourcedClaim,
    ToolRun,
    WorkflowOutcome,
    ttl_seconds,
    with_query,
)

__all__ = [
    "AGENT",
    "DEFAULT_BUDGET_TOKENS",
    "FINAL_STATUSES",
    "MAX_CLARIFICATION_OPTIONS",
    "MISSING_SOURCES",
    "MODES",
    "TEMPERATURE",
    "TIMED_OUT",
    "CatalogEntry",
    "SourcedClaim",
    "Claim",
    "ClarificationOption",
    "CommandContext",
    "Finding",
    "CoordinatorResult",
    "CoordinatorSelection",
    "Decision",
    "ResultStatus",
    "SelectionError",
    "SelectionPlan",
    "SelectionStatus",
    "ToolRun",
    "WorkflowOutcome",
    "claims_problem",
    "decide",
    "error_for_run",
    "mode_refusal",
    "parse_selection",
    "plan_selection",
    "selection_request",
    "ttl_seconds",
    "with_query",
]
