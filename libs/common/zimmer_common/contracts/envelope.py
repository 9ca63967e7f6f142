"""Wire envelopes: RPC replies and JetStream event envelopes."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from zimmer_common.contracts.subjects import rpc_subject


class Payload(BaseModel):
    """Base of every payload; `VERSION` is the payload's contract version. Replies and events
    are read leniently (a newer peer may add fields); requests are `Request`s."""

    model_config = ConfigDict(extra="ignore")
    VERSION: ClassVar[int] = 1


class Request(Payload):
    """Base of every request, on every surface (REST bodies, MCP arguments, RPCs, ingest).

    - strict types: `"3"` is not 3, `true` is not 1, `0` is not a time (times are RFC 3339
      strings, see `fields.Time`); a float field takes an integer, and an integer field a
      whole number written with a decimal point (`57285.0`: JSON Schema's `integer` is a
      number with no fractional part, however it is spelled) but never `57285.5`;
    - unknown fields are refused, at every depth, naming them;
    - a string anywhere in the request, free-form objects included, that PostgreSQL cannot
      store (NUL, U+0000) or that is not Unicode text (a lone surrogate) is refused naming
      its field.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="wrap")
    @classmethod
    def _refuse_unstorable_strings(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        return refuse_unstorable(cls, data, handler)


def refuse_unstorable(cls: type[BaseModel], data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
    """The body of `Request`'s wrap validator, for other models that must hold the same line
    (the MCP tools' argument models)."""
    if isinstance(data, dict) and not storable(data):
        bad = list(unstorable_strings(data))
        if bad:
            raise ValidationError.from_exception_data(cls.__name__, [
                InitErrorDetails(type=PydanticCustomError("unstorable_string", "{why}", {"why": why}),
                                 loc=loc, input=None) for loc, why in bad[:20]])
    try:
        return handler(data)
    except ValidationError as exc:
        whole = _whole_numbers_as_integers(data, exc)
        if whole is None:
            raise
        return handler(whole)


def _whole_numbers_as_integers(data: Any, exc: ValidationError) -> Any:
    """`data` with each whole float an integer field refused (`57285.0`) made the integer it
    spells, or None when the refusal has nothing of the kind. Only a refused request pays: strict
    validation stays as it is for every request that passes."""
    places = [e["loc"] for e in exc.errors(include_url=False)
              if e["type"] == "int_type" and isinstance(e.get("input"), float) and math.isfinite(e["input"])
              and e["input"].is_integer()]
    if not places:
        return None
    data = copy.deepcopy(data)
    changed = False
    for loc in places:
        parent: Any = None
        key: Any = None
        node = data
        for part in loc:  # a part that names no key or index is a union member's tag (`int`)
            if isinstance(node, dict) and part in node or (
                    isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
                parent, key, node = node, part, node[part]
        if parent is not None and isinstance(node, float) and not isinstance(node, bool) and node.is_integer():
            parent[key] = int(node)
            changed = True
    return data if changed else None


_NUL = "\x00"


def _why(text: str) -> str | None:
    if _NUL in text:
        return "contains NUL (U+0000), which cannot be stored"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate, which is not Unicode text"
    return None


def printable(text: str) -> str:
    """`text` with NUL and lone surrogates escaped, safe to echo in an error."""
    return text.replace(_NUL, "\\u0000").encode("utf-8", "backslashreplace").decode()


def storable(value: Any) -> bool:
    """Whether every string under `value`, dict keys included, can be stored: the usual answer,
    found without building a location for every string (every request on every surface asks;
    the generator below, which says where and why, runs only for a request that fails)."""
    if isinstance(value, str):
        return _NUL not in value and (value.isascii() or _why(value) is None)
    if isinstance(value, dict):
        for key, item in value.items():
            if not (storable(key) and storable(item)):
                return False
    elif isinstance(value, (list, tuple)):
        for item in value:
            if not storable(item):
                return False
    return True


def unstorable_strings(value: Any, loc: tuple[str | int, ...] = ()) -> Any:
    """(loc, why) for each string, or dict key, under `value` that cannot be stored."""
    if isinstance(value, str):
        why = _why(value)
        if why:
            yield loc, why
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                why = _why(key)
                if why:
                    yield (*loc, printable(key)), f"key {why}"
                    continue
            yield from unstorable_strings(item, (*loc, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from unstorable_strings(item, (*loc, i))


class RpcErrorBody(BaseModel):
    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class RpcReply(BaseModel):
    ok: bool
    data: dict[str, Any] | list[Any] | None = None
    error: RpcErrorBody | None = None


class EventEnvelope(BaseModel):
    """What every event on ZIMMER_EVENTS looks like; `id` doubles as the Nats-Msg-Id."""

    id: str
    type: str
    version: int
    source: str
    occurred_at: datetime
    data: dict[str, Any]


Req = TypeVar("Req", bound=Payload)
Resp = TypeVar("Resp", bound=Payload)


class TypedRpcReply(BaseModel, Generic[Resp]):
    """An `RpcReply` read with its data validated as the operation's response in the same pass
    (the requester's side of every RPC: reading the reply as dicts first parsed it twice)."""

    ok: bool
    data: Resp | None = None
    error: RpcErrorBody | None = None


@dataclass(frozen=True)
class RpcSpec(Generic[Req, Resp]):
    """One request/reply operation: where it lives and what goes each way."""

    ctx: str
    op: str
    request: type[Req]
    response: type[Resp]

    @property
    def subject(self) -> str:
        return rpc_subject(self.ctx, self.op)
