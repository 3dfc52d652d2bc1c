"""The path one step turn takes through the project's modules, traced with
``sys.setprofile`` around ``do_step_turn``: which modules it enters, and how
many times control enters each from another module. Printed (``-s``) for a
reader who wants the map; held here so that the path does not grow back."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from runs import actions
from runs.actions.coordinator import do_coordinator_wake
from runs.actions.steps import do_step_turn
from runs.models import Run
from tests.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("agents", "runs", "zenweb")
# The most project modules a tool-less last turn may enter: what it enters
# today (49 on SQLite, 50 on PostgreSQL, whose store has more dialect
# modules). Lower it as the path shortens; never raise it.
MOST_MODULES = 50
# The modules outside the store's SQL a tool-less last turn enters, on every
# database (a map of the turn: docs/architecture.md, "One step turn").
SAME_ON_BOTH = (
    "agents.core.attempts",
    "agents.core.machine",
    "agents.core.ready",
    "agents.core.state",
    "agents.core.turns",
    "agents.events.__init__",
    "agents.events.registry",
    "agents.expansion",
    "agents.ids",
    "agents.llm.__init__",
    "agents.llm.base",
    "agents.llm.scripted",
    "agents.llm.tokens",
    "agents.metered_provider",
    "agents.metrics",
    "agents.redaction",
    "agents.router.routing",
    "agents.runner.answer_checks",
    "agents.runner.completion",
    "agents.runner.prompts",
    "agents.runner.tool_calls",
    "agents.runner.turn",
    "agents.spec.agent",
    "agents.spec.lookup",
    "agents.telemetry",
    "agents.tools.base",
    "agents.tools.registry",
    "runs.actions.catalog",
    "runs.actions.deadlines",
    "runs.actions.model_calls",
    "runs.actions.run_states",
    "runs.actions.scheduling",
    "runs.actions.steps",
    "runs.actions.tooling",
    "runs.leases",
    "runs.metrics",
    "runs.store.events",
    "runs.store.last_turn",
    "runs.store.mailboxes",
)
# Where the two databases may take different modules: the store's dialects.
DIALECT = "runs.store.sql."


def module_of(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_relative_to(ROOT) or path.parts[len(ROOT.parts)] not in PROJECT:
        return None
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def entries(call: Callable[[], object]) -> Counter[str]:
    """How many times control enters each project module from outside it
    while ``call`` runs (a call from another module or from a library)."""
    entered: Counter[str] = Counter()
    stack: list[str | None] = []

    def profile(frame, event, _arg):
        if event == "call":
            module = module_of(frame.f_code.co_filename)
            caller = stack[-1] if stack else None
            if module is not None and module != caller:
                entered[module] += 1
            stack.append(module if module is not None else caller)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def test_a_tool_less_last_turn_takes_a_short_path_through_the_modules(vendor, recorded_tasks):
    run = actions.do_create_run(register("relay"), {"subject": "tides"})
    actions.do_start_run(run.pk)
    first = Run.objects.get(pk=run.pk).steps.get(step_id="first")
    do_step_turn(first.pk, 1)
    do_coordinator_wake(run.pk)

    entered = entries(lambda: do_step_turn(first.pk, 2))

    print(f"\n{vendor}: {len(entered)} modules")
    for module, count in sorted(entered.items()):
        print(f"  {count:3}  {module}")
    assert len(entered) <= MOST_MODULES
    # Outside the store's SQL the path is the same on every database: no
    # module of the actions, the runner or the core is entered on one only.
    outside = {m for m in entered if not m.startswith(DIALECT)}
    assert outside == set(SAME_ON_BOTH) | ({"runs.channel_layers"} if vendor == "sqlite" else set()), sorted(
        outside ^ set(SAME_ON_BOTH)
    )
