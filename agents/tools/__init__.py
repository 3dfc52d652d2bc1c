from __future__ import annotations

from agents.tools.base import Role, Tool, ToolContext, ToolError, ToolOutcome, ToolRegistry
from agents.tools.builtin.messaging import MESSAGING_TOOLS


def default_registry() -> ToolRegistry:
    """Every builtin tool zenweb ships."""
    return ToolRegistry(MESSAGING_TOOLS)


__all__ = ["Role", "Tool", "ToolContext", "ToolError", "ToolOutcome", "ToolRegistry", "default_registry"]
