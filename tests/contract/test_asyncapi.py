"""Issue 28 #1: docs/asyncapi.yaml, the AsyncAPI 3.0 document of the published language, holds every
subject the contracts declare with its payload schema, is a valid AsyncAPI 3.0 document, and is the
one the models give today (regenerate it with `zimmer asyncapi`).

The subjects and RPCs are found by walking the contracts modules here, not read from the catalog
the generator reads, so a subject added to a context module without a catalog entry fails."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

import zimmer_common.contracts as contracts_package
from zimmer_cli.asyncapi_cmd import DOCUMENT, document_text
from zimmer_cli.main import app
from zimmer_common.bus import ok_reply
from zimmer_common.contracts import catalog
from zimmer_common.contracts.asyncapi import TransportFacts, asyncapi_document, channel_id
from zimmer_common.contracts.catalog import MessageSpec
from zimmer_common.contracts.envelope import EventEnvelope, RpcReply, RpcSpec
from zimmer_common.contracts.logs import INGEST_LOGS
from zimmer_common.contracts.ops import PingReply, ping_rpc
from zimmer_common.contracts.runtime import START_TURN, StartTurn
from zimmer_common.contracts.subjects import Stream, job_subject
from zimmer_common.errors import ErrorCode
from zimmer_common.streams import stream_configs

ASYNCAPI_SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "asyncapi" / "asyncapi-3.0.0.schema.json"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return yaml.safe_load(DOCUMENT.read_text())


def _modules() -> list[Any]:
    return [importlib.import_module(f"{contracts_package.__name__}.{info.name}")
            for info in pkgutil.iter_modules(contracts_package.__path__)]


def _subject_constants() -> dict[str, str]:
    """Every module-level string of the contracts that is a subject (or a subject prefix), by where it is."""
    return {f"{module.__name__}.{name}": value for module in _modules() for name, value in vars(module).items()
            if isinstance(value, str) and value.startswith("zimmer.")}


def _rpc_constants() -> dict[str, RpcSpec[Any, Any]]:
    return {f"{module.__name__}.{name}": value for module in _modules() for name, value in vars(module).items()
            if isinstance(value, RpcSpec)}


def _rpc_builders() -> dict[str, Any]:
    """Functions of the contracts that build an RpcSpec from a variable token (`ping_rpc(ctx)`)."""
    return {f"{module.__name__}.{name}": value for module in _modules() for name, value in vars(module).items()
            if inspect.isfunction(value) and value.__module__ == module.__name__
            and str(inspect.signature(value).return_annotation).startswith("RpcSpec")}


def _channels_at(document: dict[str, Any], address: str) -> list[tuple[str, dict[str, Any]]]:
    return [(key, channel) for key, channel in document["channels"].items() if channel["address"] == address]


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _payload_refs(payload: dict[str, Any]) -> list[str]:
    """The `$ref`s a message payload names (through an envelope's `allOf` or a reply's `oneOf`)."""
    return [value for key, value in _walk(payload) if key == "$ref"]


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _is_schema_of(document: dict[str, Any], ref: str, model: type[Any]) -> bool:
    """`ref` is the model's JSON Schema: its title and its fields."""
    schema = _resolve(document, ref)
    fields = {field.alias or name for name, field in model.model_fields.items()}
    return schema.get("title") == model.__name__ and set(schema.get("properties", {})) == fields


def _validator(document: dict[str, Any], pointer: str) -> jsonschema.Draft202012Validator:
    """A validator of the schema at `pointer`, its `#/components/...` references read from the document."""
    return jsonschema.Draft202012Validator({"$ref": pointer, "components": document["components"],
                                            "channels": document["channels"]})


# ---- every subject, with its payload ------------------------------------------------------------

def test_every_subject_constant_is_a_channel_carrying_its_models(document: dict[str, Any]) -> None:
    constants = _subject_constants()
    assert len(constants) >= 25, "the walk found too few subjects: did the contracts move?"
    by_subject: dict[str, list[Any]] = {}
    for spec in catalog.MESSAGES:
        by_subject.setdefault(spec.subject, []).append(spec)
    for where, subject in constants.items():
        if where.endswith("_PREFIX"):
            assert any(c["address"] and c["address"].startswith(subject + ".") for c in document["channels"].values()), (
                f"no channel under the prefix {where} = {subject}")
            continue
        assert subject in by_subject, f"{where} = {subject} has no entry in contracts.catalog (its payload model)"
        [(key, channel)] = _channels_at(document, subject)
        for spec in by_subject[subject]:
            name = spec.event_type or spec.payload.__name__
            message = channel["messages"][name]
            assert any(_is_schema_of(document, ref, spec.payload) for ref in _payload_refs(message["payload"])), (
                f"{subject}'s message {name} does not carry {spec.payload.__name__}'s schema")
        assert document["operations"][key]["action"] == by_subject[subject][0].direction.value


def test_every_rpc_is_a_channel_with_its_request_and_its_reply(document: dict[str, Any]) -> None:
    specs = _rpc_constants()
    builders = _rpc_builders()
    assert len(specs) >= 50 and len(builders) >= 2, "the walk found too few RPCs: did the contracts move?"
    for where, builder in builders.items():
        # Built with `{parameter}` tokens, as the catalog builds its patterns.
        tokens = [f"{{{name}}}" for name in inspect.signature(builder).parameters]
        specs[where] = builder(*tokens)
    for where, spec in specs.items():
        found = _channels_at(document, spec.subject)
        assert len(found) == 1, f"{where}: no channel at {spec.subject}"
        key, channel = found[0]
        assert _is_schema_of(document, channel["messages"]["request"]["payload"]["$ref"], spec.request), where
        operation = document["operations"][key]
        assert operation["action"] == "receive" and operation["bindings"]["nats"]["queue"] == spec.ctx
        [reply_ref] = operation["reply"]["messages"]
        reply = _resolve(document, reply_ref["$ref"])
        assert any(_is_schema_of(document, ref, spec.response) for ref in _payload_refs(reply["payload"])), (
            f"{where}: the reply of {spec.subject} does not carry {spec.response.__name__}")
        assert set(re.findall(r"{(\w+)}", spec.subject)) == set(channel.get("parameters", {})), where


def test_every_catalog_entry_is_a_subject_the_contracts_declare() -> None:
    """The other way round: the catalog invents no subject (patterns aside, built by the same builders)."""
    declared = set(_subject_constants().values())
    for spec in catalog.MESSAGES:
        assert spec.subject in declared or "{" in spec.subject, spec.subject


def test_each_message_travels_on_the_stream_that_holds_its_subject() -> None:
    """The catalog's stream for each subject is the one whose subject filters take it (and no other
    stream's do), as zimmer_common.streams provisions them."""
    configs = stream_configs()
    for spec in catalog.MESSAGES:
        concrete = re.sub(r"{\w+}", "x", spec.subject)
        holders = {stream for stream, config in configs.items()
                   if any(_subject_matches(f, concrete) for f in config["subjects"])}
        assert holders == {spec.stream}, f"{spec.subject}: declared {spec.stream}, held by {holders}"


def _subject_matches(subject_filter: str, subject: str) -> bool:
    """NATS subject matching: `*` takes one token, a final `>` one or more."""
    wanted, tokens = subject_filter.split("."), subject.split(".")
    for i, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > i
        if i >= len(tokens) or token not in ("*", tokens[i]):
            return False
    return len(tokens) == len(wanted)


# ---- the document itself ------------------------------------------------------------------------

def test_the_committed_document_is_current() -> None:
    result = CliRunner().invoke(app, ["asyncapi", "--check"])
    assert result.exit_code == 0, f"{result.output}docs/asyncapi.yaml is stale: run `zimmer asyncapi` and commit it"


def test_check_refuses_a_stale_file_and_writing_makes_it_current(tmp_path: Path) -> None:
    target = tmp_path / "asyncapi.yaml"
    target.write_text(document_text().replace("session_created", "session_made", 1))
    assert CliRunner().invoke(app, ["asyncapi", "--check", "--output", str(target)]).exit_code == 1
    assert CliRunner().invoke(app, ["asyncapi", "--output", str(target)]).exit_code == 0
    assert CliRunner().invoke(app, ["asyncapi", "--check", "--output", str(target)]).exit_code == 0
    assert target.read_text() == document_text(), "two generations differ: the output is not deterministic"


def test_the_document_is_valid_asyncapi_3(document: dict[str, Any]) -> None:
    schema = json.loads(ASYNCAPI_SCHEMA.read_text())
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:10])
    assert document["asyncapi"] == "3.0.0" and document["servers"]["nats"]["protocol"] == "nats"


def test_every_reference_resolves_and_every_address_parameter_is_declared(document: dict[str, Any]) -> None:
    refs = [value for key, value in _walk(document) if key == "$ref"]
    assert len(refs) > 100
    for ref in refs:
        _resolve(document, ref)
    for key, channel in document["channels"].items():
        assert channel["address"] is None and key.endswith(".reply") or key == channel_id(channel["address"])
        tokens = set(re.findall(r"{(\w+)}", channel["address"] or ""))
        assert tokens == set(channel.get("parameters", {})), key


# ---- real messages against the document's schemas -----------------------------------------------

def test_a_start_turn_as_spot_gate_publishes_it_matches_its_schema(document: dict[str, Any]) -> None:
    key = channel_id(START_TURN)
    command = StartTurn(session_id=7, turn_kind="first_start", prompt="fix the flaky test", runtime="local",
                        harness="claude", model="claude-sonnet")
    envelope = EventEnvelope(id="spot_gate.4f2c", type="start_turn", version=StartTurn.VERSION, source="spot-gate",
                             occurred_at=datetime(2026, 1, 2, tzinfo=UTC), data=command.model_dump(mode="json"))
    validator = _validator(document, f"#/channels/{key}/messages/start_turn/payload")
    validator.validate(envelope.model_dump(mode="json"))
    wrong_type = envelope.model_copy(update={"type": "stop_turn"}).model_dump(mode="json")
    assert not validator.is_valid(wrong_type)
    no_session = {**envelope.model_dump(mode="json"), "data": {k: v for k, v in command.model_dump(mode="json").items()
                                                               if k != "session_id"}}
    assert not validator.is_valid(no_session)


def test_rpc_replies_as_the_bus_writes_them_match_the_reply_schema(document: dict[str, Any]) -> None:
    key = channel_id(ping_rpc("{ctx}").subject)
    validator = _validator(document, f"#/channels/{key}.reply/messages/reply/payload")
    answer = PingReply(service="spot-gate", version="0.1.0", instance_id="host-a-1f2e3d", uptime_seconds=12.5,
                       ready=True, database=True)
    validator.validate(json.loads(ok_reply(answer)))
    refused = RpcReply(ok=False, error={"code": ErrorCode.NOT_FOUND.value, "message": "no session 7"})  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
    validator.validate(refused.model_dump(mode="json"))
    unknown_code = RpcReply(ok=False, error={"code": "nope", "message": "?"})  # type: ignore[arg-type]  # pydantic validates the dict into RpcErrorBody
    assert not validator.is_valid(unknown_code.model_dump(mode="json"))
    half_answer = json.loads(ok_reply(answer))
    del half_answer["data"]["ready"]
    assert not validator.is_valid(half_answer)


def test_a_job_tick_as_the_runner_writes_it_matches_its_schema(document: dict[str, Any]) -> None:
    key = channel_id(job_subject("{ctx}", "{lane}", "{job}"))
    validator = _validator(document, f"#/channels/{key}/messages/JobTick/payload")
    validator.validate(json.loads(json.dumps({"job": "ceiling_sweep"})))  # zimmer_common.jobs' body
    assert not validator.is_valid({})


def test_messages_of_one_subject_that_disagree_on_their_stream_are_refused() -> None:
    [log_line, log_lines] = [spec for spec in catalog.MESSAGES if spec.subject == INGEST_LOGS]
    astray = MessageSpec(log_lines.subject, log_lines.event_type, log_lines.payload, Stream.EVENTS,
                         log_lines.direction, log_lines.sender, log_lines.summary)
    facts = TransportFacts(version="0", streams={}, error_codes=["invalid"])
    with pytest.raises(ValueError, match="disagree"):
        asyncapi_document(facts, [], [], [log_line, astray])
