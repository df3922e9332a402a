"""Forms built from a message type's JSON schema (msgspec's), and the values they send.

Each top-level field of a Struct becomes one input: text, number, checkbox, a
choice for an enum, and JSON for anything nested. What comes back is converted
to the type with ``msgspec.convert``, so a value that does not fit is refused
with the field it is in named (``at $.replicas``), before anything is sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec

from actorflow.errors import ConfigurationError
from actorflow.runtime.registry import class_name

__all__ = ["Field", "fields_of", "schema_of", "value_of"]

_VALUE = "value"
"""The one field of a form for a type that is not a Struct (``str``, ``int``, a list)."""


@dataclass(frozen=True, kw_only=True)
class Field:
    """One input of a form."""

    name: str
    widget: str  # text, number, checkbox, select, json
    required: bool
    choices: tuple[str, ...] = ()
    default: str = ""
    hint: str = ""


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: dict[str, Any] = defs.get(ref.removeprefix("#/$defs/"), {})
        return resolved
    return schema


def _field(name: str, schema: dict[str, Any], defs: dict[str, Any], required: bool) -> Field:
    schema = _resolve(schema, defs)
    kind = schema.get("type")
    default = schema.get("default")
    shown = "" if default is None else default
    if "enum" in schema:
        choices = tuple(str(c) for c in schema["enum"])
        return Field(
            name=name, widget="select", required=required, choices=choices, default=str(shown)
        )
    if kind == "string":
        return Field(name=name, widget="text", required=required, default=str(shown))
    if kind in ("integer", "number"):
        return Field(
            name=name, widget="number", required=required, default=str(shown), hint=str(kind)
        )
    if kind == "boolean":
        return Field(name=name, widget="checkbox", required=False, default="1" if default else "")
    text = "" if default is None else json.dumps(default)
    return Field(name=name, widget="json", required=required, default=text, hint="JSON")


def schema_of(cls: type[Any]) -> dict[str, Any]:
    """``cls``'s JSON schema (msgspec's), its top-level reference resolved."""
    schema = msgspec.json.schema(cls)
    return _resolve(schema, schema.get("$defs", {}))


def _is_record(top: dict[str, Any]) -> bool:
    return top.get("type") == "object" and "properties" in top


def fields_of(cls: type[Any]) -> list[Field]:
    """The inputs of a form for a message of type ``cls``."""
    schema = msgspec.json.schema(cls)
    defs = schema.get("$defs", {})
    top = _resolve(schema, defs)
    if _is_record(top):
        required = set(top.get("required", ()))
        return [_field(n, s, defs, n in required) for n, s in top["properties"].items()]
    return [_field(_VALUE, top, defs, True)]


def value_of(cls: type[Any], form: dict[str, str]) -> Any:
    """The message of type ``cls`` the submitted ``form`` describes.

    Raises:
        ConfigurationError: a field holds no valid JSON where JSON is wanted,
            or the value does not fit ``cls`` (``expected`` names the field).
    """
    fields = fields_of(cls)
    data: dict[str, Any] = {}
    for field in fields:
        raw = form.get(f"f.{field.name}")
        if field.widget == "checkbox":
            data[field.name] = raw is not None
            continue
        if raw is None or (raw == "" and not field.required):
            continue
        if field.widget == "number":
            try:
                data[field.name] = json.loads(raw)
            except ValueError:
                data[field.name] = raw  # the type check below names the field
        elif field.widget == "json":
            try:
                data[field.name] = json.loads(raw)
            except ValueError as exc:
                raise ConfigurationError(f"field {field.name!r}", raw, f"JSON ({exc})") from None
        else:
            data[field.name] = raw
    value: Any = data if _is_record(schema_of(cls)) else data.get(_VALUE)
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        why = str(exc).replace("`$`", "the value").replace("`$.", "field `")
        raise ConfigurationError("the answer", value, f"a {class_name(cls)}: {why}") from None
