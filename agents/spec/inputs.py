"""A workflow's inputs: the values the person starting a run provides."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from agents.inputs import workspace_path
from agents.spec.fields import SpecModel

# ``path``: a place inside the run's workspace (agents.inputs.workspace_path).
InputType = Literal["string", "integer", "number", "boolean", "path"]

INPUT_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "path": str,
}


class InputSpec(SpecModel):
    """A value the person starting a run provides, substituted as ``$name``."""

    type: InputType = "string"
    required: bool = False
    description: str = ""
    default: Any = None

    @model_validator(mode="after")
    def _default_matches_type(self) -> InputSpec:
        default = self.default
        # bool is an int in Python, but not an integer or a number in a form.
        wrong_bool = isinstance(default, bool) != (self.type == "boolean")
        if default is not None and (wrong_bool or not isinstance(default, INPUT_TYPES[self.type])):
            raise ValueError(f"default {default!r} is not of type {self.type}")
        if default is not None and self.type == "path":
            try:
                workspace_path(default)
            except ValueError as exc:
                raise ValueError(f"default {default!r}: {exc}") from None
        return self
