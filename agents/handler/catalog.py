"""What the handler's model is told about each workflow of the catalog, and
the modes a workflow may run in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.spec import InputSpec, WorkflowSpec

MODES = ("chat", "code")


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
        """JSON-ready data for the prompt; ``compact`` leaves out descriptions and outputs."""
        inputs: dict[str, Any] = {}
        for name, spec in self.inputs.items():
            data: dict[str, Any] = {"type": spec.type, "required": spec.required}
            if name in self.list_inputs:
                data["list"] = True
            if spec.default is not None or not compact:
                data["default"] = spec.default
            if not compact:
                data["description"] = spec.description
            inputs[name] = data
        entry: dict[str, Any] = {"name": self.name}
        if not compact:
            entry["description"] = self.description
        entry |= {"triggers": list(self.triggers), "inputs": inputs, "mode": self.mode, "destructive": self.destructive}
        if not compact:
            entry["outputs"] = list(self.outputs)
        return entry


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
