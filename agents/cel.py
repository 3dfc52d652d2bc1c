"""CEL, the expression language of zenflow's ``condition``, ``until`` and
``forEach``: read and evaluated with cel-python (``celpy``). The only module
that touches CEL; pure (no Django, no I/O).

An expression reads zenflow's variables: ``steps`` (each finished step's
``content``, ``status`` and ``result`` by its id), ``content``, ``result``
and ``status`` (the step or iteration just finished), ``iteration``,
``item`` and ``index``. A step id with a hyphen is read as ``steps['a-b']``:
``steps.a-b`` is ``steps.a`` minus ``b`` in CEL.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

VARIABLES = frozenset({"steps", "iteration", "item", "index", "content", "result", "status"})
# Macros whose first argument names a variable of their own (x in list.all(x, x > 0)).
_BINDING_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_HYPHENATED_STEP = re.compile(r"\bsteps\.([A-Za-z][\w]*(?:-[\w]+)+)")

_ENVIRONMENT = celpy.Environment()


class CelError(ValueError):
    """An expression that does not parse, fails to evaluate, or gives the wrong type."""


class CelMissingData(CelError):
    """An expression that reads what its variables lack (a step that has not
    finished, a key its result has not): zenflow skips a step whose
    ``condition`` fails so, where it fails a step for any other error."""


# celpy's words for a member or key its variables lack.
_MISSING = ("no such member", "no such key", "no such attribute")


@dataclass(frozen=True)
class Expression:
    """A parsed expression and the variables it reads."""

    text: str
    tree: lark.Tree[Any]

    @property
    def names(self) -> frozenset[str]:
        """The free variables the expression reads (not those its macros bind)."""
        return frozenset(_free_names(self.tree))

    @property
    def unknown_names(self) -> list[str]:
        """Free variables that are none of zenflow's (``VARIABLES``), sorted."""
        return sorted(self.names - VARIABLES)


def parse(text: str) -> Expression:
    """The expression ``text``; CelError, with the column, when it does not parse."""
    try:
        tree = _ENVIRONMENT.compile(text)
    except CELParseError as exc:
        column = f" at column {exc.column}" if exc.column else ""
        raise CelError(f"CEL syntax error{column} in {text!r}") from None
    except (lark.exceptions.LarkError, RecursionError) as exc:
        raise CelError(f"CEL syntax error in {text!r}: {exc}") from None
    return Expression(text, tree)


def syntax_problem(text: str) -> str | None:
    """Why ``text`` is no CEL expression, or None."""
    try:
        parse(text)
    except CelError as exc:
        return str(exc)
    return None


def name_hint(expression: Expression) -> str | None:
    """What to say of the variables an expression reads that are none of
    zenflow's, or None when it reads only those."""
    unknown = expression.unknown_names
    if not unknown:
        return None
    hint = f"reads {', '.join(repr(n) for n in unknown)}, which no run gives (it has {', '.join(sorted(VARIABLES))})"
    hyphenated = _HYPHENATED_STEP.search(expression.text)
    if hyphenated:
        step = hyphenated.group(1)
        hint += f"; steps.{step} is a subtraction in CEL: write steps['{step}']"
    return hint


def evaluate(text: str, variables: Mapping[str, Any]) -> Any:
    """The value of ``text`` with ``variables`` (JSON-like values), as plain
    Python (bool, int, float, str, list, dict, None). CelError when it fails."""
    expression = parse(text)
    program = _ENVIRONMENT.program(expression.tree)
    activation = {name: json_to_cel(value) for name, value in variables.items()}
    try:
        value = program.evaluate(activation)
    except CELEvalError as exc:
        raise _failed(text, exc) from None
    if isinstance(value, CELEvalError):
        raise _failed(text, value)
    return _plain(value)


def _failed(text: str, error: Exception) -> CelError:
    reason = _reason(error)
    kind = CelMissingData if any(words in reason for words in _MISSING) else CelError
    return kind(f"CEL expression {text!r} failed: {reason}")


def _reason(error: Exception) -> str:
    """The error's own words, without the activation celpy appends."""
    text = str(error.args[0]) if error.args else str(error)
    return text.split(" (in activation", 1)[0]


def evaluate_bool(text: str, variables: Mapping[str, Any]) -> bool:
    """``text`` as a condition: CelError unless it gives true or false."""
    value = evaluate(text, variables)
    if not isinstance(value, bool):
        raise CelError(f"CEL expression {text!r} gave {type(value).__name__}, not a bool")
    return value


def evaluate_list(text: str, variables: Mapping[str, Any]) -> list[Any]:
    """``text`` as forEach's items: CelError unless it gives a list."""
    value = evaluate(text, variables)
    if not isinstance(value, list):
        raise CelError(f"CEL expression {text!r} gave {type(value).__name__}, not a list")
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.IntType | celtypes.UintType):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.ListType):
        return [_plain(item) for item in value]
    if isinstance(value, celtypes.MapType):
        return {_plain(key): _plain(item) for key, item in value.items()}
    return value


def _free_names(tree: lark.Tree[Any], bound: frozenset[str] = frozenset()) -> Iterator[str]:
    if tree.data == "ident":
        name = str(tree.children[0])
        if name not in bound:
            yield name
        return
    if tree.data == "member_dot_arg" and len(tree.children) == 3 and str(tree.children[1]) in _BINDING_MACROS:
        target, _, arguments = tree.children
        yield from _free_names(target, bound)
        parts = [c for c in arguments.children if isinstance(c, lark.Tree)]
        variable = _bare_name(parts[0]) if parts else None
        inner = bound | {variable} if variable else bound
        for part in parts[1:]:
            yield from _free_names(part, inner)
        return
    for child in tree.children:
        if isinstance(child, lark.Tree):
            yield from _free_names(child, bound)


def _bare_name(tree: lark.Tree[Any]) -> str | None:
    """The name an expression is, when it is only a name."""
    idents = list(tree.find_data("ident"))
    leaves = [t for t in tree.iter_subtrees() if t.data not in _WRAPPERS]
    if len(idents) == 1 and leaves == idents:
        return str(idents[0].children[0])
    return None


_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary", "member", "primary"}
)
