"""Structured tool failures: what went wrong and how the model can recover.

Kinds and recovery actions follow Goa-AI's current names. A failure never
raises out of a step: the model gets the error line and a ``retry_hint``
line of JSON, and may correct the call, re-plan, or finish.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
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


@dataclass(frozen=True)
class RetryHint:
    kind: FailureKind
    action: RecoveryAction
    fields: list[str] = field(default_factory=list)
    prior_input: Any = None
    example_input: dict[str, Any] | None = None
    question: str = ""

    def as_data(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value not in (None, "", [])}


def failure_text(message: str, hint: RetryHint) -> str:
    """The tool result a model sees for a failed call: the message (at most
    MAX_ERROR_CHARS) and the hint, its prior input as a preview when its
    JSON is longer than MAX_PRIOR_INPUT_CHARS."""
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + " …[cut]"
    data = hint.as_data()
    if "prior_input" in data:
        prior = json.dumps(data["prior_input"], ensure_ascii=False, default=str)
        if len(prior) > MAX_PRIOR_INPUT_CHARS:
            preview = prior[: MAX_PRIOR_INPUT_CHARS // 2]
            data["prior_input"] = {"omitted": True, "reason": "size_limit", "chars": len(prior), "preview": preview}
    return f"error: {message}\nretry_hint: {json.dumps(data, ensure_ascii=False, default=str)}"


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
