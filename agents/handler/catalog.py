"""What the handler's model is told about each workflow of the catalog, and
the modes a workflow may run in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.spec import InputSpec, WorkflowSpec

MODES = ("chat", "code")
# What the compact catalog's shorthand means, said once above it.
COMPACT_LEGEND = (
    "Compact catalog: inputs are listed as name (required), name? (optional), :type when not a string, "
    "[] for a list, =default; a workflow runs in chat mode and is not destructive unless it says so."
)


@dataclass(frozen=True)
class CatalogEntry:
    """What the handler's model is told about one workflow."""

    name: str
    description: str = ""
    triggers: tuple[str, ...] = ()
    inputs: dict[str, InputSpec] = field(default_factory=dict, hash=False)
    mode: str = "chat"
    destructive: bool = False
    outputs: tuple[str, ...] = ()
    # Text inputs a forEach loop iterates: their value is a list of items.
    list_inputs: frozenset[str] = frozenset()

    @classmethod
    def of(cls, spec: WorkflowSpec) -> CatalogEntry:
        return cls(
            name=spec.name,
            description=spec.description,
            triggers=tuple(spec.triggers),
            inputs=dict(spec.inputs),
            mode=spec.mode,
            destructive=spec.destructive,
            outputs=tuple(spec.outputs),
            list_inputs=frozenset(_for_each_inputs(spec.steps)) & set(spec.inputs),
        )

    def as_prompt_data(self, compact: bool = False) -> dict[str, Any]:
        """JSON-ready data for the prompt. ``compact`` leaves out descriptions
        and outputs, writes the inputs as one line (``COMPACT_LEGEND``) and
        says the mode and destructive only when they are not the default."""
        if compact:
            return self._compact_data()
        inputs: dict[str, Any] = {}
        for name, spec in self.inputs.items():
            data: dict[str, Any] = {"type": spec.type, "required": spec.required}
            if name in self.list_inputs:
                data["list"] = True
            data["default"] = spec.default
            data["description"] = spec.description
            inputs[name] = data
        return {
            "name": self.name,
            "description": self.description,
            "triggers": list(self.triggers),
            "inputs": inputs,
            "mode": self.mode,
            "destructive": self.destructive,
            "outputs": list(self.outputs),
        }

    def _compact_data(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "triggers": list(self.triggers)}
        if self.inputs:
            entry["inputs"] = ", ".join(self._compact_input(name, spec) for name, spec in self.inputs.items())
        if self.mode != "chat":
            entry["mode"] = self.mode
        if self.destructive:
            entry["destructive"] = True
        return entry

    def _compact_input(self, name: str, spec: InputSpec) -> str:
        text = name if spec.required else f"{name}?"
        if spec.type != "string":
            text += f":{spec.type}"
        if name in self.list_inputs:
            text += "[]"
        if spec.default is not None:
            text += f"={json.dumps(spec.default, ensure_ascii=False)}"
        return text


def mode_refusal(workflow: str, needs: str, mode: str) -> str | None:
    """Why a workflow that needs ``needs`` mode may not run in ``mode``, or
    None: a code-mode workflow changes files, and chat mode never may."""
    if needs == "code" and mode == "chat":
        return f"{workflow} workflow requires code mode - currently in chat mode"
    return None


def _for_each_inputs(steps: list[Any]) -> Iterator[str]:
    for step in steps:
        if step.loop is not None:
            if isinstance(step.loop.for_each, str):  # an input's name, not a list of its own
                yield step.loop.for_each
            yield from _for_each_inputs(step.loop.steps)


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}: expected chat or code")
