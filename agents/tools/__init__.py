from __future__ import annotations

from agents.tools.base import INJECTED, Role, Tool, ToolCallMeta, ToolContext, ToolError, ToolHost
from agents.tools.builtin.ask import ASK_PERSON
from agents.tools.builtin.claims import RECORD_CLAIM
from agents.tools.builtin.extending import EXTENDING_TOOLS
from agents.tools.builtin.files import FILE_TOOLS
from agents.tools.builtin.messaging import MESSAGING_TOOLS
from agents.tools.builtin.research import RESEARCH_TOOLS
from agents.tools.builtin.shell import SHELL_TOOLS
from agents.tools.registry import ToolOutcome, ToolRegistry
from agents.tools.results import Artifact, Bounds, ToolAnswer
from agents.tools.spawn import SPAWN_WORKER
from agents.tools.worker_request import WorkerRequest


def default_registry() -> ToolRegistry:
    """Every builtin tool zenweb ships."""
    builtin = [
        *MESSAGING_TOOLS,
        SPAWN_WORKER,
        *FILE_TOOLS,
        *SHELL_TOOLS,
        *RESEARCH_TOOLS,
        RECORD_CLAIM,
        ASK_PERSON,
        *EXTENDING_TOOLS,
    ]
    return ToolRegistry(builtin)


__all__ = [
    "INJECTED",
    "Artifact",
    "Bounds",
    "Role",
    "Tool",
    "ToolCallMeta",
    "ToolContext",
    "ToolError",
    "ToolHost",
    "ToolOutcome",
    "ToolRegistry",
    "ToolAnswer",
    "WorkerRequest",
    "default_registry",
]
