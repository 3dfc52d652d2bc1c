"""Workflow texts and files for the spec tests: minimal workflows around a
``steps:`` block, the folder of container examples, and a file's problems
as text."""

from __future__ import annotations

import textwrap
from pathlib import Path

from agents.spec import validate_workflow

CONTAINERS = Path(__file__).parent.parent / "workflows" / "containers"


def write(tmp_path, text, name="flow.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(path, known_tools=None):
    return [str(problem) for problem in validate_workflow(path, known_tools)]


def workflow(steps, agents="agents: {a1: {description: a1 agent}}"):
    """A minimal workflow around the given ``steps:`` block (lines 3 onwards)."""
    return f"name: flow\n{agents}\nsteps:\n{textwrap.dedent(steps)}"


def container_workflow(steps, inputs=""):
    """A workflow with agents a1 and judge around the given ``steps:`` block
    (lines 4 onwards, or later with ``inputs``)."""
    judge = "judge: {description: judge agent, resultSchema: {properties: {done: {type: boolean}}, required: [done]}}"
    agents = f"agents: {{a1: {{description: a1 agent}}, {judge}}}\n"
    return f"name: flow\n{agents}{inputs}steps:\n{textwrap.dedent(steps)}"
