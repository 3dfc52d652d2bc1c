"""Structured tool failures: what went wrong and how the model can recover.

A failure never raises out of a step: the model gets the error line, a
``cause:`` line for each error beneath it, and a ``retry_hint`` line of
JSON in Goa-AI's RetryHint vocabulary, and may correct the call, re-plan,
or finish.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

FailureKind = Literal[
    "invalid_call", "domain_rejection", "unavailable", "rate_limited", "timeout", "malformed_result", "internal"
]
RecoveryAction = Literal["correct_call", "replan", "finish"]
# A failure's text stays well under a result's cap (agents/tools/results.py):
# its message cut, and an argument as long as a book (a 200,000-character
# message the schema refused) sent back as a preview, not whole, on every
# later turn of the step.
MAX_ERROR_CHARS = 4_000
MAX_PRIOR_INPUT_CHARS = 2_000
# A cause chain longer than this is cut: the model needs the root, not a novel.
MAX_CAUSES = 5


RetryReason = Literal[
    "invalid_arguments",
    "missing_fields",
    "malformed_response",
    "timeout",
    "rate_limited",
    "tool_unavailable",
    "domain_rejection",
    "internal_error",
]
# A failure's kind, as the retry hint's ``reason`` (Goa-AI's RetryReason).
REASONS: dict[str, RetryReason] = {
    "invalid_call": "invalid_arguments",
    "domain_rejection": "domain_rejection",
    "unavailable": "tool_unavailable",
    "rate_limited": "rate_limited",
    "timeout": "timeout",
    "malformed_result": "malformed_response",
    "internal": "internal_error",
}
# What each recovery action asks of the model, as the hint's ``message``.
RECOVERY = {
    "correct_call": "Correct the arguments and call this tool again.",
    "replan": "Do not repeat this call as it was: choose another tool or approach.",
    "finish": "Stop calling tools for this: finish with what you have and say what is missing.",
}


@dataclass(frozen=True)
class RetryHint:
    """How the model can recover from a failed call. ``as_data`` is what it
    reads, in Goa-AI's RetryHint vocabulary (docs/tools.md, "Failures and
    retry hints"): ``reason``, ``tool``, ``restrict_to_tool``,
    ``missing_fields``, ``example_input``, ``prior_input``,
    ``clarifying_question``, ``message``; ``kind`` and ``action`` are kept
    beside them as aliases (the run page and the journal file a failure by
    its kind)."""

    kind: FailureKind
    action: RecoveryAction
    fields: list[str] = field(default_factory=list)
    prior_input: Any = None
    example_input: dict[str, Any] | None = None
    question: str = ""
    tool: str = ""
    # The reason when the kind's own would mislead: "missing_fields" when only
    # absent fields are at fault, "tool_unavailable" for a tool not offered.
    why: RetryReason | None = None
    message: str = ""

    @property
    def reason(self) -> RetryReason:
        return self.why or REASONS[self.kind]

    def as_data(self) -> dict[str, Any]:
        data = {
            "reason": self.reason,
            "tool": self.tool,
            "restrict_to_tool": self.action == "correct_call" and bool(self.tool),
            "missing_fields": self.fields,
            "example_input": self.example_input,
            "prior_input": self.prior_input,
            "clarifying_question": self.question,
            "message": self.message or RECOVERY[self.action],
            "kind": self.kind,
            "action": self.action,
        }
        return {key: value for key, value in data.items() if value not in (None, "", [], False)}


def failure_text(message: str, hint: RetryHint, causes: list[str] | None = None) -> str:
    """The tool result a model sees for a failed call: the message (at most
    MAX_ERROR_CHARS), a ``cause:`` line for each error beneath it (the
    ToolError's cause chain, outermost first), and the hint last, its prior
    input as a preview when its JSON is longer than MAX_PRIOR_INPUT_CHARS."""
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + " …[cut]"
    data = hint.as_data()
    if "prior_input" in data:
        prior = json.dumps(data["prior_input"], ensure_ascii=False, default=str)
        if len(prior) > MAX_PRIOR_INPUT_CHARS:
            preview = prior[: MAX_PRIOR_INPUT_CHARS // 2]
            data["prior_input"] = {"omitted": True, "reason": "size_limit", "chars": len(prior), "preview": preview}
    lines = [f"error: {message}"]
    lines += [f"cause: {cause[: MAX_ERROR_CHARS // 4]}" for cause in (causes or [])[:MAX_CAUSES]]
    lines.append(f"retry_hint: {json.dumps(data, ensure_ascii=False, default=str)}")
    return "\n".join(lines)


def example_input(model: type[BaseModel]) -> dict[str, Any]:
    """A minimal valid-looking argument object for ``model``: its required
    fields with a placeholder of the right JSON type."""
    schema = model.model_json_schema()
    placeholders = {"string": "...", "integer": 0, "number": 0.0, "boolean": False, "array": [], "object": {}}
    example: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema.get("properties", {}).get(name, {})
        example[name] = spec.get("default", placeholders.get(spec.get("type", "string"), "..."))
    return example
