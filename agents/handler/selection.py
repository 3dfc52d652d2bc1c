"""Command -> selection: the request that shows a model the catalog, and the
reading of its answer as a COORDINATOR_SELECTION."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agents import bounded_json
from agents.handler.catalog import COMPACT_LEGEND, CatalogEntry, check_mode
from agents.handler.shapes import CoordinatorSelection, SelectionError
from agents.llm import tokens
from agents.llm.base import CompletionRequest

AGENT = "workflow_handler"
# Selection is classification, not writing: a low temperature.
TEMPERATURE = 0.4
DEFAULT_BUDGET_TOKENS = 2500


_SYSTEM = """\
You are the workflow handler. You translate one command, written in plain words, \
into the selection of one workflow from the catalog in the user message.

Rules:
- Select only a workflow whose name is in the catalog. Never invent a workflow and never answer with a tool name.
- Match the command against each workflow's name, triggers and description.
- Put the workflow's inputs in "workflow_args", taking the values from the command and giving each the \
input's type (string, integer, number, boolean, or path: text); an input with "list": true takes a JSON list \
of strings ("eu and us" is ["eu", "us"]). Never guess a value the command does not give, and never add to what it says.
- The current mode is {mode}. A workflow with "mode": "code" runs only in code mode.
- A workflow with "destructive": true may be selected as usual: a person approves it before it runs.

Statuses:
- "selected": one workflow clearly fits and every required input has a value.
- "needs_more_info": one workflow fits but required inputs have no value; list them in "missing" \
and say what you need in "message".
- "needs_clarification": several workflows could fit, or none does; give "clarification_options", \
each {{"interpretation": "<what the command might mean>", "would_select": "<catalog name>"}}. \
Also when one workflow fits but the command's value for an input is unclear ("eu or us", "all regions"): \
name that input in "missing" and ask in "message".
- "blocked": the workflow is not allowed in the current mode; in chat mode a code-mode workflow gets \
"error": "<workflow> workflow requires code mode - currently in chat mode".

Answer with ONLY one JSON object and nothing else:
{{"_type": "COORDINATOR_SELECTION", "command_received": "<the command>", "workflow_selected": "<name or null>", \
"workflow_args": {{}}, "status": "<status>", "missing": [], "message": null, "error": null, \
"clarification_options": [], "selection_reason": "<why this workflow, in one sentence>"}}"""


@dataclass(frozen=True)
class SelectionPlan:
    """The selection request for one command, and what its prompt costs.

    ``full_tokens`` is the prompt with the full catalog; when that is past
    ``budget_tokens`` the compact catalog is sent (``compacted``) and
    ``sent_tokens`` is what that prompt costs.
    """

    request: CompletionRequest
    compacted: bool
    full_tokens: int
    sent_tokens: int
    budget_tokens: int

    def event_data(self) -> dict[str, Any]:
        """The data of the ``catalog_compacted`` event."""
        return {
            "agent": AGENT,
            "full_tokens": self.full_tokens,
            "compact_tokens": self.sent_tokens,
            "budget_tokens": self.budget_tokens,
            "over_budget": self.sent_tokens > self.budget_tokens,
        }


def plan_selection(
    command: str,
    entries: list[CatalogEntry],
    mode: str,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    model: str | None = None,
    chosen: str | None = None,
    context: dict[str, str] | None = None,
) -> SelectionPlan:
    """The request that asks a model to pick a workflow for ``command``.

    With ``chosen``, the person already picked the workflow (a clarification
    answered): the model is told so and reads the command's inputs for it;
    the caller passes that workflow's entry alone in ``entries``.
    ``context`` (goal_focus, workflow_hint, original_query) is shown after
    the command, as the Executor's, never above what the command says.

    The prompt is counted with ``model``'s encoding (``agents.llm.tokens``);
    when the full catalog would push it past ``budget_tokens``, the compact
    catalog (no descriptions, no outputs) is sent instead. A compact prompt
    may still be over budget: every workflow stays selectable.
    """
    check_mode(mode)
    system = _SYSTEM.format(mode=mode)
    full_catalog = _catalog_json(entries, compact=False)
    messages = _selection_messages(system, _user_message(command, mode, full_catalog, chosen, context))
    full_tokens = sent_tokens = tokens.count_messages(messages, model)
    compacted = full_tokens > budget_tokens
    if compacted:
        compact = _catalog_json(entries, compact=True)
        messages = _selection_messages(system, _user_message(command, mode, compact, chosen, context))
        sent_tokens = tokens.count_messages(messages, model)
    variables = {"command": command, "mode": mode, "catalog_json": full_catalog}
    if chosen is not None:
        variables["chosen"] = chosen
    if context:
        variables["context_json"] = json.dumps(context, ensure_ascii=False)
    request = CompletionRequest(
        agent=AGENT, messages=messages, model=model, temperature=TEMPERATURE, variables=variables
    )
    return SelectionPlan(request, compacted, full_tokens, sent_tokens, budget_tokens)


def selection_request(
    command: str,
    entries: list[CatalogEntry],
    mode: str,
    *,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
) -> tuple[CompletionRequest, bool]:
    """``plan_selection``'s request and whether the catalog was compacted."""
    plan = plan_selection(command, entries, mode, budget_tokens=budget_tokens)
    return plan.request, plan.compacted


def parse_selection(text: str | None, command: str) -> CoordinatorSelection:
    """Read the model's answer: one JSON object, bare or in a ```json fence.

    ``command_received`` is always ``command``: the handler knows what it was
    sent better than the model's echo of it. Raises ``SelectionError``.
    """
    raw = (text or "").strip()
    fenced = _fenced(raw)
    body = fenced.strip() if fenced is not None else raw
    try:
        data = bounded_json.loads(body, what="the answer")
    except ValueError:
        snippet = raw[:200] + ("..." if len(raw) > 200 else "") if raw else "(empty answer)"
        raise SelectionError(f"the model did not answer JSON: {snippet}") from None
    if not isinstance(data, dict):
        raise SelectionError(f"the model answered JSON {_json_kind(data)}, not an object")
    data["command_received"] = command
    try:
        return CoordinatorSelection.model_validate(data)
    except ValidationError as exc:
        raise SelectionError(f"invalid COORDINATOR_SELECTION: {_problems(exc)}") from None


def _fenced(text: str) -> str | None:
    """What the first ``` fence of ``text`` holds, past a ``json`` tag; None
    without a closed fence. Found with str.find, not a regular expression:
    ``r"```[ \t]*(?:json)?[ \t]*\n?(.*?)```"`` backtracked cubically on an
    unclosed fence followed by spaces (4,000 characters of answer held the
    GIL for a minute)."""
    start = text.find("```")
    end = text.find("```", start + 3) if start != -1 else -1
    if end == -1:
        return None
    body = text[start + 3 : end].lstrip(" \t")
    if body[:4].lower() == "json":
        body = body[4:].lstrip(" \t")
    return body.removeprefix("\n")


def _catalog_json(entries: list[CatalogEntry], *, compact: bool) -> str:
    data = [entry.as_prompt_data(compact) for entry in entries]
    if compact:
        # One workflow a line: the model reads it as easily, and a line costs no indentation.
        lines = ",\n".join(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) for entry in data)
        return f"{COMPACT_LEGEND}\n[{lines}]"
    return json.dumps(data, ensure_ascii=False)


def _selection_messages(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _user_message(
    command: str, mode: str, catalog_json: str, chosen: str | None = None, context: dict[str, str] | None = None
) -> str:
    message = f"Workflow catalog (JSON):\n{catalog_json}\n\nCurrent mode: {mode}\n\nCommand:\n{command}"
    if context:
        message += (
            "\n\nContext from the Executor (JSON; a workflow_hint never overrides what the command asks for):\n"
            + json.dumps(context, ensure_ascii=False)
        )
    if chosen is not None:
        message += (
            f"\n\nThe person chose the workflow {json.dumps(chosen)} for this command:"
            " select it, with the inputs the command gives."
        )
    return message


def _problems(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        loc = ".".join(str(part) for part in error["loc"])
        problems.append(f"field {loc!r}: {message}" if loc else message)
    return "; ".join(problems)


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return kinds.get(type(value), "null")
