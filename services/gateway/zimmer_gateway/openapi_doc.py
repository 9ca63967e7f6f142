"""What the OpenAPI document states beyond what FastAPI writes (issue 31 #7): integer bounds as
the contracts state them, and that no string a request carries holds NUL.

FastAPI checks the document it generates against its own model of the OpenAPI schema object,
whose `minimum`/`maximum` are floats: every bound in `components` comes out a float (`1.0`,
`10.0`), and the 64-bit maximum of an id, 2^63 - 1, which no float spells, comes out as
`9.223372036854776e+18`, that is 2^63 (a JSON reader that keeps decimals reads 9223372036854776000).
A client that trusts the document then sends 9223372036854775807 < n <= 2^63 and gets a 422.

`exact_integer_bounds` puts the integers back in every schema of type `integer`: a whole float is
the integer it spells, and a bound at 2^63 in magnitude is the 64-bit one it stands for (every
integer the API takes is a PostgreSQL bigint at most: no other bound rounds to it).

`no_nul_strings` states what `Request` (and the edge, for the query string) enforces everywhere:
PostgreSQL cannot store NUL (U+0000), so no string of a request holds it, free-form objects'
keys and nested values included. Every string schema without a pattern of its own gets
`^[^\\x00]*$` (the patterns the contracts set exclude NUL already), and every free-form object
is an object of `StoredJsonValue`s whose keys have no NUL either. Responses carry what was
stored, so the same holds of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from zimmer_common.contracts.fields import NO_NUL

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
BOUNDS: Final = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _integer(value: float) -> int:
    if value >= float(2**63):
        return INT64_MAX
    if value <= float(INT64_MIN):
        return INT64_MIN
    return int(value)


def exact_integer_bounds(node: Any) -> Any:
    """`node` (the document, or any part of it) with the bounds of every integer schema written
    as integers; changed in place and returned."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            for key in BOUNDS:
                value = node.get(key)
                if isinstance(value, float) and value.is_integer():
                    node[key] = _integer(value)
        for value in node.values():
            exact_integer_bounds(value)
    elif isinstance(node, list):
        for value in node:
            exact_integer_bounds(value)
    return node


STORED_JSON: Final = "StoredJsonValue"
_STORED_REF: Final = {"$ref": f"#/components/schemas/{STORED_JSON}"}
_STORED_KEYS: Final = {"pattern": NO_NUL}


def _free_form(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" and node.get("additionalProperties") is True


def no_nul_strings(spec: dict[str, Any]) -> dict[str, Any]:
    """`spec` with NUL refused in every string and free-form object of its components and of
    its operations' parameters and request bodies; changed in place and returned."""
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "string" and not {"pattern", "enum", "const"} & node.keys():
                node["pattern"] = NO_NUL
            if _free_form(node):
                node["propertyNames"] = dict(_STORED_KEYS)
                node["additionalProperties"] = dict(_STORED_REF)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    walk(schemas)
    for methods in spec.get("paths", {}).values():
        for operation in methods.values():
            if isinstance(operation, dict):
                walk(operation.get("parameters"))
                walk(operation.get("requestBody"))
    schemas[STORED_JSON] = {
        "title": "StoredJsonValue",
        "description": "Any JSON value whose strings and object keys hold no NUL (U+0000), at any depth",
        "anyOf": [{"type": "string", "pattern": NO_NUL}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
                  {"type": "array", "items": dict(_STORED_REF)},
                  {"type": "object", "propertyNames": dict(_STORED_KEYS), "additionalProperties": dict(_STORED_REF)}]}
    return spec


def with_stated_rules(app: Any) -> None:
    """Make `app.openapi()` answer with `exact_integer_bounds` and `no_nul_strings` applied (once
    per built document)."""
    built: Callable[[], dict[str, Any]] = app.openapi
    if getattr(built, "stated_rules", False):
        return
    done: list[int] = []

    def openapi() -> dict[str, Any]:
        spec = built()
        if not done or done[0] != id(spec):
            no_nul_strings(exact_integer_bounds(spec))
            done[:] = [id(spec)]
        return spec

    openapi.stated_rules = True  # type: ignore[attr-defined]  # a marker attribute on the function
    app.openapi = openapi
