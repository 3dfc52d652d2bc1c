"""Tool names and argument models for MCP tools.

A model sees ``<server>__<tool>`` (OpenAI function names allow only
``[a-zA-Z0-9_-]{1,64}``, so the catalog's dotted id cannot be used). The
arguments are checked against the server's own JSON schema with
``jsonschema``; failures come out as a pydantic ValidationError whose
locations are the fields at fault, so the registry turns them into the same
``invalid_call`` retry hint as any other tool's.

The schema's regular expressions (``pattern``, ``patternProperties``) are
the server's, but the strings they are matched against are a model's: they
are matched with RE2, in linear time (agents/linear_regex.py), never with
Python's backtracking ``re``. One RE2 cannot express (a backreference,
lookaround) is not checked here: the server judges.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from jsonschema import Draft202012Validator, SchemaError
from jsonschema import ValidationError as SchemaViolation
from jsonschema.validators import extend, validator_for
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from agents import linear_regex
from agents.tools.mcp.config import SEPARATOR, server_of

__all__ = ["JsonSchemaArgs", "args_model", "model_name", "server_of"]

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def model_name(server: str, remote: str, taken: Iterable[str] = ()) -> str:
    """The function name a model calls ``remote`` of ``server`` by:
    ``<server>__<tool>``, unsafe characters replaced by ``_``, shortened with
    a hash when longer than 64 or already ``taken``."""
    name = f"{server}{SEPARATOR}{_UNSAFE.sub('_', remote)}"
    taken = set(taken)
    if len(name) > MAX_NAME or name in taken:
        digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


class JsonSchemaArgs(BaseModel):
    """Arguments of an MCP tool: any JSON object the server's schema accepts.

    Subclasses set ``input_schema``; ``model_validate`` checks data against
    it, ``model_json_schema`` returns it, and ``model_dump`` gives the
    arguments back as they were sent."""

    model_config = ConfigDict(extra="allow")
    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    _validator: ClassVar[Any] = None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> JsonSchemaArgs:
        errors = sorted(cls._schema_validator().iter_errors(obj), key=lambda e: list(e.absolute_path))
        if errors:
            details = [
                InitErrorDetails(
                    type=PydanticCustomError("json_schema", "{message}", {"message": _message(err)}),
                    loc=_location(err),
                    input=err.instance,
                )
                for err in errors[:10]
            ]
            raise ValidationError.from_exception_data(cls.__name__, details)
        return cls.model_construct(**obj)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        schema = {key: value for key, value in cls.input_schema.items() if key != "$schema"}
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    @classmethod
    def _schema_validator(cls) -> Any:
        if cls.__dict__.get("_validator") is None:
            validator = _linear(validator_for(cls.input_schema, default=Draft202012Validator), cls.input_schema)
            try:
                validator.check_schema(cls.input_schema)
                cls._validator = validator(cls.input_schema)
            except SchemaError:
                # A server's broken schema must not make the tool unusable:
                # check only that the arguments are an object and let the server judge.
                cls._validator = Draft202012Validator({"type": "object"})
        return cls._validator


def _matches(pattern: str, text: str) -> bool | None:
    """Whether RE2 finds ``pattern`` in ``text``; None if RE2 cannot express it."""
    try:
        return linear_regex.compile(pattern).search(text) is not None
    except linear_regex.error:
        return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterable[SchemaViolation]:
    if validator.is_type(instance, "string") and _matches(pattern, instance) is False:
        yield SchemaViolation(f"{instance[:100]!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterable[SchemaViolation]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterable[SchemaViolation]:
    if not validator.is_type(instance, "object"):
        return
    named = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    # A pattern RE2 cannot express counts as matching: the server judges that key.
    extras = sorted(
        key for key in instance if key not in named and not any(_matches(p, key) is not False for p in patterns)
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(extra) for extra in extras)
        yield SchemaViolation(f"Additional properties are not allowed ({listed} unexpected)")


def _unchecked(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Iterable[SchemaViolation]:
    return ()


def _linear(validator: Any, schema: dict[str, Any]) -> Any:
    """``validator``'s class with its regular-expression keywords matched by
    RE2. ``unevaluatedProperties`` matches patternProperties with ``re``
    inside jsonschema: in a schema that has any, the server judges it."""
    keywords = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    if "patternProperties" in json.dumps(schema):
        keywords["unevaluatedProperties"] = _unchecked
    return extend(validator, keywords)  # type: ignore[no-untyped-call]  # untyped in its stubs


def args_model(title: str, input_schema: dict[str, Any]) -> type[JsonSchemaArgs]:
    """An argument model class for one MCP tool's input schema."""
    schema = dict(input_schema or {})
    return type(title, (JsonSchemaArgs,), {"input_schema": schema, "__module__": __name__})


def _location(err: SchemaViolation) -> tuple[int | str, ...]:
    path = tuple(err.absolute_path)
    if err.validator == "required" and isinstance(err.instance, dict) and isinstance(err.validator_value, list):
        missing = [name for name in err.validator_value if name not in err.instance]
        return (*path, missing[0]) if missing else path
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {}) if isinstance(err.schema, Mapping) else ())
        extra = sorted(name for name in err.instance if name not in allowed)
        return (*path, extra[0]) if extra else path
    return path


def _message(err: SchemaViolation) -> str:
    if err.validator == "required":
        return "Field required"
    if err.validator == "additionalProperties":
        return "Extra inputs are not permitted"
    return err.message[:300]
