"""What is wrong with a workflow file, and where: problems and the error that
lists them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a workflow file."""

    source: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        field = f"{self.field}: " if self.field else ""
        return f"{where}: {field}{self.message}"


class WorkflowValidationError(ValueError):
    """A workflow file is invalid; ``problems`` lists everything found, by line."""

    def __init__(self, problems: Iterable[SpecProblem]) -> None:
        # Problems without a line concern the whole file, so they come first;
        # an included file's problems follow those of the file including it.
        problems = list(dict.fromkeys(problems))
        files = {source: n for n, source in enumerate(dict.fromkeys(p.source for p in problems))}
        self.problems = sorted(problems, key=lambda p: (files[p.source], p.line is not None, p.line or 0))
        super().__init__("\n".join(str(problem) for problem in self.problems))

    def __reduce__(self) -> tuple[type[WorkflowValidationError], tuple[Any, ...]]:
        # Exceptions pickle as cls(*args), and args holds the text, not the problems.
        return type(self), (self.problems,)


def dotted(loc: Sequence[str | int]) -> str:
    """``("steps", 2, "dependsOn", 0)`` -> ``steps[2].dependsOn[0]``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
