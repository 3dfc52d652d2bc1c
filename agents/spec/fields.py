"""The names, limits and defaults every part of a workflow shares, and the
base model of its parts (camelCase keys in YAML, snake_case attributes)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

# Step ids as zenflow's (capitals allowed), at most 64 characters (the
# runtime id's column); names of tools and the like stay lowercase.
STEP_ID_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_-]{0,63}$"
NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"
INPUT_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
MAX_STEPS = 100
MAX_DESCRIPTION = 2000
MAX_ITERATIONS = 100
# Items of one forEach loop: its input's, or the list it gives itself.
MAX_FOR_EACH_ITEMS = 100
# Containers inside containers (loops in loops), and include files including others.
MAX_NESTING = 5
MAX_INCLUDE_DEPTH = 5
# Tool calls: the default and the longest per-call timeout (seconds).
DEFAULT_TOOL_TIMEOUT = 300.0
MAX_TOOL_TIMEOUT = 3600.0
DEFAULT_FOR_EACH_CONCURRENCY = 5
# Hints for empty answers before the step fails (options.maxEmptyAnswerRetries).
DEFAULT_EMPTY_ANSWER_RETRIES = 2
PATTERN_HINTS = {
    STEP_ID_PATTERN: "use letters, digits, '_' and '-', starting with a letter, at most 64 characters",
    NAME_PATTERN: "use lowercase letters, digits, '_' and '-', starting with a letter, at most 64 characters",
    INPUT_NAME_PATTERN: "use lowercase letters, digits and '_', starting with a letter, at most 64 characters",
}

StepId = Annotated[str, StringConstraints(pattern=STEP_ID_PATTERN)]
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
InputName = Annotated[str, StringConstraints(pattern=INPUT_NAME_PATTERN)]
Provider = Literal["scripted", "openai"]
OnStepFailure = Literal["cascade", "skip-dependents", "abort"]
Mode = Literal["chat", "code"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(value: Any) -> Any:
    """A timeout as a number of seconds, or as zenflow writes one, a Go
    duration: ``90s``, ``10m``, ``1h30m``, ``500ms``. Anything else is left
    to the field's own check (a number, in seconds)."""
    if not isinstance(value, str) or not value.strip() or _number(value):
        return value
    text = value.strip()
    parts = _DURATION.findall(text)
    if "".join(number + unit for number, unit in parts) != text:
        raise ValueError(f"expected seconds (a number) or a duration such as 90s, 10m or 1h30m, got {value!r}")
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# Seconds, written as a number or as a duration (duration_seconds).
Seconds = Annotated[float, BeforeValidator(duration_seconds)]

# Set by parse_workflow, which runs the cross-field checks itself so that each
# problem gets its own line; other callers of model_validate get them as one error.
DEFER_CHECKS = "zenweb.spec.defer_checks"


class SpecModel(BaseModel):
    # Infinity is no timeout, budget or count a run can keep (nor JSON can store).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel, allow_inf_nan=False)
