"""Tool names and argument models for MCP tools.

A model sees ``<server>__<tool>`` (OpenAI function names allow only
``[a-zA-Z0-9_-]{1,64}``, so the catalog's dotted id cannot be used). The
arguments are checked against the server's own JSON schema with
``jsonschema``; failures come out as a pydantic ValidationError whose
locations are the fields at fault, so the registry turns them into the same
``invalid_call`` retry hint as any other tool's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any, ClassVar

from jsonschema import Draft202012Validator, SchemaError
from jsonschema import ValidationError as SchemaViolation
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

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
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> JsonSchemaArgs:  # type: ignore[override]
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
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        schema = {key: value for key, value in cls.input_schema.items() if key != "$schema"}
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema

    @classmethod
    def _schema_validator(cls) -> Any:
        if cls.__dict__.get("_validator") is None:
            validator = validator_for(cls.input_schema, default=Draft202012Validator)
            try:
                validator.check_schema(cls.input_schema)
                cls._validator = validator(cls.input_schema)
            except SchemaError:
                # A server's broken schema must not make the tool unusable:
                # check only that the arguments are an object and let the server judge.
                cls._validator = Draft202012Validator({"type": "object"})
        return cls._validator


def args_model(title: str, input_schema: dict[str, Any]) -> type[JsonSchemaArgs]:
    """An argument model class for one MCP tool's input schema."""
    schema = dict(input_schema or {})
    return type(title, (JsonSchemaArgs,), {"input_schema": schema, "__module__": __name__})


def _location(err: SchemaViolation) -> tuple[int | str, ...]:
    path = tuple(err.absolute_path)
    if err.validator == "required" and isinstance(err.instance, dict):
        missing = [name for name in err.validator_value if name not in err.instance]
        return (*path, missing[0]) if missing else path
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set((err.schema or {}).get("properties", {}))
        extra = sorted(name for name in err.instance if name not in allowed)
        return (*path, extra[0]) if extra else path
    return path


def _message(err: SchemaViolation) -> str:
    if err.validator == "required":
        return "Field required"
    if err.validator == "additionalProperties":
        return "Extra inputs are not permitted"
    return err.message[:300]
