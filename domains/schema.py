"""A strict subset of JSON Schema, for tool arguments and the structured-output family.

    from domains.schema import validate
    validate({"x": 1}, {"type": "object", "properties": {"x": {"type": "integer"}}})  # -> [] (list of problems)

Supported keywords: type (incl. a list of types), properties, required, additionalProperties (bool), items,
enum, const, minimum, maximum, minLength, maxLength, pattern (full match), minItems, maxItems.
Strict on purpose: booleans are not numbers, 1.0 is not an integer, "3" is not a number (no coercion).
"""
from __future__ import annotations

import re
from typing import Any

_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def type_name(v: Any) -> str:
    for name in ("boolean", "integer", "number", "string", "array", "object", "null"):
        if _TYPES[name](v):
            return name
    return type(v).__name__


def validate(value: Any, sch: dict, path: str = "$") -> list[str]:
    """All problems of `value` against `sch`, as 'path: message' strings; [] means valid."""
    out: list[str] = []
    where = path if path != "$" else "value"
    t = sch.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_TYPES[x](value) for x in types):
            return [f"{where} must be {' or '.join(types)}, got {type_name(value)}"]
    if "const" in sch and value != sch["const"]:
        out.append(f"{where} must equal {sch['const']!r}")
    if "enum" in sch and value not in sch["enum"]:
        out.append(f"{where} must be one of {sch['enum']}")
    if _TYPES["number"](value):
        if "minimum" in sch and value < sch["minimum"]:
            out.append(f"{where} must be >= {sch['minimum']}")
        if "maximum" in sch and value > sch["maximum"]:
            out.append(f"{where} must be <= {sch['maximum']}")
    if isinstance(value, str):
        if "minLength" in sch and len(value) < sch["minLength"]:
            out.append(f"{where} must have at least {sch['minLength']} characters")
        if "maxLength" in sch and len(value) > sch["maxLength"]:
            out.append(f"{where} must have at most {sch['maxLength']} characters")
        if "pattern" in sch and not re.fullmatch(sch["pattern"], value):
            out.append(f"{where} must match /{sch['pattern']}/")
    if isinstance(value, list):
        if "minItems" in sch and len(value) < sch["minItems"]:
            out.append(f"{where} must have at least {sch['minItems']} items")
        if "maxItems" in sch and len(value) > sch["maxItems"]:
            out.append(f"{where} must have at most {sch['maxItems']} items")
        if "items" in sch:
            for i, item in enumerate(value):
                out += validate(item, sch["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        props = sch.get("properties", {})
        for k in sch.get("required", []):
            if k not in value:
                out.append(f"missing required property {k!r}" + ("" if path == "$" else f" in {path}"))
        for k, v in value.items():
            if k in props:
                out += validate(v, props[k], f"{path}.{k}" if path != "$" else k)
            elif sch.get("additionalProperties", True) is False:
                out.append(f"unexpected property {k!r}" + ("" if path == "$" else f" in {path}"))
    return out
