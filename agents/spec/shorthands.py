"""zenflow's shorthands, written out in raw workflow data before it is
validated: a loop without ``steps`` runs its own step, a prompt or
instructions of ``@path`` are that file's text, and a step without an agent
runs as the default agent; and, once it is validated, the text of each
step's ``contextFiles``."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Any

from agents.spec.checks import include_path_problem
from agents.spec.yaml_locations import Location

# The agent of steps that name none (zenflow's default agent).
DEFAULT_AGENT = "default"
DEFAULT_AGENT_DESCRIPTION = "The agent of steps that name none."
# A file read for an @-reference or contextFiles: at most this many bytes.
MAX_REFERENCED_BYTES = 1_000_000
# What a step's prompt gets of one of its contextFiles (as of one dependency's output).
MAX_CONTEXT_FILE_CHARS = 8 * 1024
TRUNCATED = "...[truncated for context limit]"
# Fields of a looped step that go into the one inner step of its loop.
_INNER_FIELDS = ("agent", "instructions", "model", "contextFiles", "maxRetries")


def loop_own_step(data: dict[str, Any], lines: MutableMapping[Location, int]) -> None:
    """A step whose loop has no ``steps`` (zenflow's single-step loop): its
    agent, instructions, model, contextFiles and maxRetries become the loop's
    one inner step, of the same id; the lines stay those of the file."""
    for at, step in _raw_steps(data.get("steps"), ("steps",)):
        loop = step.get("loop")
        if not isinstance(loop, dict) or "steps" in loop or "include" in step:
            continue
        inner: dict[str, Any] = {"id": step.get("id")}
        inner_at = (*at, "loop", "steps", 0)
        for name in _INNER_FIELDS:
            if name in step:
                inner[name] = step.pop(name)
                if (*at, name) in lines:
                    lines[(*inner_at, name)] = lines[(*at, name)]
        loop["steps"] = [inner]
        if at in lines:
            lines[inner_at] = lines[at]


def default_agent(data: dict[str, Any]) -> None:
    """Steps that run an agent but name none run as ``DEFAULT_AGENT``,
    which the workflow gets unless it defines one of that name."""
    plain = [
        step
        for _, step in _raw_steps(data.get("steps"), ("steps",))
        if "agent" not in step and "loop" not in step and "include" not in step
    ]
    if not plain:
        return
    for step in plain:
        step["agent"] = DEFAULT_AGENT
    agents = data.setdefault("agents", {})
    if isinstance(agents, dict) and DEFAULT_AGENT not in agents:
        agents[DEFAULT_AGENT] = {"description": DEFAULT_AGENT_DESCRIPTION}


def read_references(data: dict[str, Any], folder: Path | None) -> None:
    """An agent's ``prompt``/``system`` or a step's ``instructions`` that is
    ``@path`` becomes the text of that file in the workflow's folder (never
    outside it). One that cannot be read stays as written: a warning says so
    (agents.spec.not_run)."""
    if folder is None:
        return
    agents = data.get("agents")
    for agent in agents.values() if isinstance(agents, dict) else []:
        for key in ("prompt", "system"):
            if isinstance(agent, dict) and isinstance(agent.get(key), str):
                agent[key] = _referenced(agent[key], folder)
    for _, step in _raw_steps(data.get("steps"), ("steps",)):
        if isinstance(step.get("instructions"), str):
            step["instructions"] = _referenced(step["instructions"], folder)


def read_context_files(steps: Sequence[Any], folder: Path | None) -> None:
    """Fill each step's ``context_file_texts`` with the ``contextFiles`` that
    can be read from the workflow's folder (never outside it), each cut at
    ``MAX_CONTEXT_FILE_CHARS``. One that cannot be read is left out: a warning
    says so and no run starts (agents.spec.not_run)."""
    for step in steps:
        if step.loop is not None:
            read_context_files(step.loop.steps, folder)
        for path in step.context_files:
            text = _readable(path, folder) if folder is not None else None
            if text is not None:
                cut = len(text) > MAX_CONTEXT_FILE_CHARS
                step.context_file_texts[path] = text[:MAX_CONTEXT_FILE_CHARS] + (TRUNCATED if cut else "")


def file_reference(text: str) -> str | None:
    """The path ``@path`` text names, or None for other text."""
    if not text.startswith("@") or "\n" in text.strip():
        return None
    path = text[1:].strip()
    return path or None


def _referenced(text: str, folder: Path) -> str:
    path = file_reference(text)
    read = _readable(path, folder) if path is not None else None
    return text if read is None else read


def _readable(path: str, folder: Path) -> str | None:
    """The text of the file ``path`` names in ``folder`` (never outside it),
    or None when there is none, it is too big or not UTF-8."""
    if include_path_problem(path) is not None:
        return None
    target = (folder / path).resolve()
    if not target.is_relative_to(folder.resolve()) or not target.is_file():
        return None
    try:
        if target.stat().st_size > MAX_REFERENCED_BYTES:
            return None
        return target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _raw_steps(steps: object, at: Location) -> Iterator[tuple[Location, dict[str, Any]]]:
    if not isinstance(steps, list):
        return
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        yield (*at, i), step
        loop = step.get("loop")
        if isinstance(loop, dict):
            yield from _raw_steps(loop.get("steps"), (*at, i, "loop", "steps"))
