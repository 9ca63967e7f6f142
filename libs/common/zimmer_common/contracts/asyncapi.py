"""The published language as an AsyncAPI 3.0 document, built from the contract models (DESIGN §3,
§9 "The runtime's side is a package"; issue 28 #1). `zimmer asyncapi` writes it to
docs/asyncapi.yaml and a test keeps the committed file current.

Pure: catalog and transport facts in, a dict out. The document is written from the control
plane's side: an RPC is an operation the services `receive` and answer (AsyncAPI's `reply`), an
event or a runtime command one they `send`, ingest one they `receive`. Payloads are the models'
JSON Schemas in `components/schemas` (one definition per model, shared by every message that
carries it); an event's payload is the `EventEnvelope` with the model as its `data`, an RPC's
reply the `{ok, data}` / `{ok: false, error}` envelope with the model as its `data`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from zimmer_common.contracts.catalog import Direction, MessageSpec, Parameter, RpcPattern
from zimmer_common.contracts.envelope import EventEnvelope, RpcErrorBody, RpcSpec
from zimmer_common.contracts.subjects import service_of_ctx
from zimmer_common.contracts.wire import CALLER_HEADER, DEADLINE_HEADER, MSG_ID_HEADER

ASYNCAPI_VERSION = "3.0.0"
SCHEMAS = "#/components/schemas/"
NATS_BINDING_VERSION = "0.1.0"
ERROR_REPLY = "RpcErrorReply"
NS_PER_SECOND = 1_000_000_000
# JetStream settings worth a reader's attention, in the order they are shown.
STREAM_FACTS = ("retention", "discard", "max_age", "duplicate_window", "max_msgs_per_subject")


@dataclass(frozen=True)
class TransportFacts:
    """What the document says that the contracts package does not hold: the project's version, each
    stream's JetStream configuration (`zimmer_common.streams.stream_configs`) and the closed set of
    error codes (`zimmer_common.errors.ErrorCode`)."""

    version: str
    streams: Mapping[str, Mapping[str, Any]]
    error_codes: Sequence[str]
    nats_url: str = "127.0.0.1:4222"


INFO_DESCRIPTION = """\
Every subject Zimmer's services speak on NATS, with its payload, generated from the pydantic models in
`zimmer_common.contracts` (`zimmer asyncapi`; do not edit by hand). Seen from the control plane: the
services `receive` requests and ingest, and `send` events and runtime commands.

- **Request/reply** (`zimmer.<ctx>.rpc.<operation>`): core NATS; the owning service answers in queue
  group `<ctx>`. The reply is `{"ok": true, "data": ...}` or `{"ok": false, "error": {"code", "message",
  "details"}}`, the code one of a closed set. A request carries `Zimmer-Deadline` (absolute, seconds
  since the epoch): one that arrives after it is dropped unanswered, and a requester that hears
  nothing by then must take the answer as `unavailable`, never as done.
- **JetStream** (events, runtime commands, ingest, pages, operations events): each message is an
  `EventEnvelope` whose `id` is also its `Nats-Msg-Id` header, so a re-publish inside the stream's
  duplicate window is dropped by the server; consumers are idempotent past it. A consumer refuses
  an envelope `version` newer than it knows. Each channel's `x-jetstream` names its stream and the
  stream's retention.
- **Jobs** (`zimmer.jobs.<ctx>.<lane>.<job>`): work-queue ticks with a bare `{"job": name}` body.
"""


def asyncapi_document(facts: TransportFacts, rpcs: Iterable[RpcSpec[Any, Any]], rpc_patterns: Iterable[RpcPattern],
                      messages: Iterable[MessageSpec]) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of `rpcs`, `rpc_patterns` and `messages` (the catalog's, in use),
    channels, operations and schemas in sorted order so that the same models give the same document."""
    rpc_list = [(spec, (), "") for spec in rpcs] + [(p.spec, p.parameters, p.summary) for p in rpc_patterns]
    by_subject = _grouped(messages)
    schemas, refs = _schemas(rpc_list, by_subject, facts.error_codes)
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for spec, parameters, summary in rpc_list:
        _add_rpc(channels, operations, refs, spec, parameters, summary)
    for subject, specs in by_subject.items():
        _add_stream_channel(channels, operations, refs, facts, subject, specs)
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {"title": "Zimmer control plane: the published language on NATS", "version": facts.version,
                 "description": INFO_DESCRIPTION},
        "defaultContentType": "application/json",
        "servers": {"nats": {
            "host": "{host}", "protocol": "nats",
            "description": "The NATS server with JetStream (ZIMMER_NATS_URL); runtimes connect with the fleet "
                           "credential.",
            "variables": {"host": {"default": facts.nats_url, "description": "host:port of a NATS server"}}}},
        "channels": dict(sorted(channels.items())),
        "operations": dict(sorted(operations.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


# ---- schemas ---------------------------------------------------------------------------------

ModelKey = tuple[type[BaseModel], JsonSchemaMode]


def _mode(direction: Direction) -> JsonSchemaMode:
    # What a service receives is validated by it; what it sends is what it serializes.
    return "validation" if direction is Direction.RECEIVED else "serialization"


def _schemas(rpcs: Sequence[tuple[RpcSpec[Any, Any], Any, str]], by_subject: Mapping[str, Sequence[MessageSpec]],
             error_codes: Sequence[str]) -> tuple[dict[str, Any], dict[ModelKey, str]]:
    """Every model's JSON Schema under one namespace (pydantic names two classes of the same name
    by their modules), and the `$ref` of each (model, mode)."""
    keys: list[ModelKey] = [(EventEnvelope, "serialization"), (RpcErrorBody, "serialization")]
    for spec, _, _ in rpcs:
        keys += [(spec.request, "validation"), (spec.response, "serialization")]
    for specs in by_subject.values():
        keys += [(s.payload, _mode(s.direction)) for s in specs]
    unique = list(dict.fromkeys(keys))
    refs_by_key, top = models_json_schema(unique, ref_template=SCHEMAS + "{model}")
    schemas = dict(top.get("$defs", {}))
    schemas.update(_header_schemas())
    schemas[ERROR_REPLY] = {
        "title": ERROR_REPLY, "type": "object", "required": ["ok", "error"],
        "description": "The reply of a request that was refused or failed: `code` is one of a closed set "
                       "(the gateway maps each to an HTTP status); `details.retry_safe: true` says nothing was "
                       "done and asking again is safe.",
        "properties": {"ok": {"const": False}, "data": {"type": "null"},
                       "error": {"allOf": [{"$ref": SCHEMAS + "RpcErrorBody"},
                                           {"properties": {"code": {"enum": list(error_codes)}}}]}}}
    return schemas, {key: value["$ref"] for key, value in refs_by_key.items()}


def _envelope(ref: str, event_type: str, model: type[BaseModel]) -> dict[str, Any]:
    return {"allOf": [{"$ref": SCHEMAS + "EventEnvelope"}, {
        "type": "object",
        "properties": {"type": {"const": event_type}, "version": {"const": getattr(model, "VERSION", 1)},
                       "data": {"$ref": ref}}}]}


def _reply(ref: str) -> dict[str, Any]:
    return {"oneOf": [{"type": "object", "required": ["ok", "data"],
                       "properties": {"ok": {"const": True}, "data": {"$ref": ref}, "error": {"type": "null"}}},
                      {"$ref": SCHEMAS + ERROR_REPLY}]}


def _headers(names: Mapping[str, str], required: Sequence[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object",
                              "properties": {name: {"type": "string", "description": text}
                                             for name, text in names.items()}}
    if required:
        schema["required"] = list(required)
    return schema


# Headers shared by many messages: one definition each in components/schemas.
RPC_HEADERS = "RpcRequestHeaders"
JETSTREAM_HEADERS = "JetStreamHeaders"
SCHEDULE_HEADERS = "ScheduleHeaders"


def _header_schemas() -> dict[str, Any]:
    return {
        RPC_HEADERS: _headers({
            DEADLINE_HEADER: "The requester's absolute deadline, seconds since the epoch (`%.6f`); a request that "
                             "arrives after it is dropped unanswered.",
            CALLER_HEADER: "Who asks, carried through inner requests; logs and refusals name it."}),
        JETSTREAM_HEADERS: _headers({
            MSG_ID_HEADER: "The message's idempotency key, equal to the envelope's `id`: the stream drops a second "
                           "message with the same id inside its duplicate window."}, [MSG_ID_HEADER]),
        SCHEDULE_HEADERS: _headers({
            "Nats-Schedule": "The cadence (`@every 30s`, or a cron expression).",
            "Nats-Schedule-Target": "The tick subject the server publishes to."},
            ["Nats-Schedule", "Nats-Schedule-Target"]),
    }


# ---- channels and operations -----------------------------------------------------------------


def channel_id(subject: str) -> str:
    """A channel's key: its subject without the common `zimmer.` and without the braces of its
    parameters (`zimmer.{ctx}.rpc.ping` → `ctx.rpc.ping`), so that every `$ref` to it is a plain
    JSON pointer."""
    return subject.removeprefix("zimmer.").replace("{", "").replace("}", "")


def _parameters(parameters: Sequence[Parameter]) -> dict[str, Any]:
    return {p.name: {"description": p.description, **({"enum": list(p.enum)} if p.enum else {})}
            for p in parameters}


def _channel(subject: str | None, title: str, description: str, messages: Mapping[str, Any],
             parameters: Sequence[Parameter] = ()) -> dict[str, Any]:
    channel: dict[str, Any] = {"address": subject, "title": title, "description": description,
                               "messages": dict(messages)}
    if parameters:
        channel["parameters"] = _parameters(parameters)
    return channel


def _message(name: str, summary: str, payload: dict[str, Any], headers: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"name": name, "title": name, "summary": summary, "contentType": "application/json"}
    if headers is not None:
        message["headers"] = {"$ref": SCHEMAS + headers}
    message["payload"] = payload
    return message


def _add_rpc(channels: dict[str, Any], operations: dict[str, Any], refs: Mapping[ModelKey, str],
             spec: RpcSpec[Any, Any], parameters: Sequence[Parameter], summary: str) -> None:
    key = channel_id(spec.subject)
    service = service_of_ctx(spec.ctx) or spec.ctx
    summary = summary or f"{spec.op}, answered by {service}."
    request = _message(f"{spec.op}_request", summary, {"$ref": refs[(spec.request, "validation")]}, RPC_HEADERS)
    reply = _message(f"{spec.op}_reply", f"The answer to {spec.op}.",
                     _reply(refs[(spec.response, "serialization")]), None)
    channels[key] = _channel(spec.subject, spec.op, f"Request/reply on core NATS, answered by {service} in queue "
                             f"group `{spec.ctx}`.", {"request": request}, parameters)
    channels[f"{key}.reply"] = _channel(None, f"{spec.op} reply", "The requester's inbox: the reply subject NATS "
                                        "gives the request (unknown until the request is made).", {"reply": reply})
    operations[key] = {
        "action": Direction.RECEIVED.value, "channel": {"$ref": f"#/channels/{key}"}, "title": spec.op,
        "summary": summary, "tags": [{"name": spec.ctx}],
        "bindings": {"nats": {"queue": spec.ctx, "bindingVersion": NATS_BINDING_VERSION}},
        "messages": [{"$ref": f"#/channels/{key}/messages/request"}],
        "reply": {"channel": {"$ref": f"#/channels/{key}.reply"},
                  "messages": [{"$ref": f"#/channels/{key}.reply/messages/reply"}]},
    }


def _grouped(messages: Iterable[MessageSpec]) -> dict[str, list[MessageSpec]]:
    """Messages by subject, sorted; every message of one subject must agree on its stream and side."""
    grouped: dict[str, list[MessageSpec]] = {}
    for spec in messages:
        grouped.setdefault(spec.subject, []).append(spec)
    for subject, specs in grouped.items():
        if len({(s.stream, s.direction, s.parameters) for s in specs}) > 1:
            raise ValueError(f"the messages on {subject} disagree on their stream, direction or parameters")
    return dict(sorted(grouped.items()))


def jetstream_facts(stream: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A stream's configuration as a reader wants it: durations in seconds."""
    facts: dict[str, Any] = {"stream": stream}
    for name in STREAM_FACTS:
        if name in config:
            value = config[name]
            is_duration = name in ("max_age", "duplicate_window")
            facts[f"{name}_seconds" if is_duration else name] = value // NS_PER_SECOND if is_duration else value
    return facts


def _stream_message(spec: MessageSpec, refs: Mapping[ModelKey, str]) -> tuple[str, dict[str, Any]]:
    ref = refs[(spec.payload, _mode(spec.direction))]
    if spec.event_type is None:
        name = spec.payload.__name__
        headers = SCHEDULE_HEADERS if spec.direction is Direction.SENT else None
        return name, _message(name, spec.summary, {"$ref": ref}, headers)
    return spec.event_type, _message(spec.event_type, spec.summary, _envelope(ref, spec.event_type, spec.payload),
                                     JETSTREAM_HEADERS)


def _add_stream_channel(channels: dict[str, Any], operations: dict[str, Any], refs: Mapping[ModelKey, str],
                        facts: TransportFacts, subject: str, specs: Sequence[MessageSpec]) -> None:
    key = channel_id(subject)
    first = specs[0]
    stream = first.stream.value
    messages = dict(_stream_message(spec, refs) for spec in specs)
    retention = facts.streams.get(stream, {}).get("retention", "limits")
    how = "work queue: each message is taken by one consumer and then gone" if retention == "workqueue" else \
        "limits retention: every durable consumer reads every message"
    senders = ", ".join(sorted({s.sender for s in specs}))
    channel = _channel(subject, key, f"JetStream stream `{stream}` ({how}). Sent by {senders}.", messages,
                       first.parameters)
    channel["x-jetstream"] = jetstream_facts(stream, facts.streams.get(stream, {}))
    channels[key] = channel
    operations[key] = {
        "action": first.direction.value, "channel": {"$ref": f"#/channels/{key}"}, "title": key,
        "summary": " ".join(spec.summary for spec in specs), "tags": [{"name": key.split(".")[0]}],
        "messages": [{"$ref": f"#/channels/{key}/messages/{name}"} for name in messages],
    }
