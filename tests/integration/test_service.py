"""Every service boots, migrates its schema, answers ping and publishes heartbeats."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
import textwrap
from pathlib import Path

import asyncpg
import nats
import pytest

from zimmer_cli.registry import SERVICES
from zimmer_common.bus import Bus
from zimmer_common.contracts.envelope import EventEnvelope
from zimmer_common.contracts.ops import HEARTBEAT, PingRequest, ping_rpc
from zimmer_common.contracts.subjects import CONTEXTS, Stream
from zimmer_common.db import MigrationError, migrate


def build(name: str, settings):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    module, attr = SERVICES[name].split(":")
    return getattr(importlib.import_module(module), attr)(settings)


@pytest.mark.parametrize("name", sorted(SERVICES))
async def test_service_boots_migrates_and_answers_ping(name: str, settings_factory, empty_database_url: str) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = build(name, settings_factory(heartbeat_interval_seconds=0.2, database_url=empty_database_url))
    await service.start()
    try:
        bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=2)
        try:
            reply = await bus.request(ping_rpc(CONTEXTS[name]), PingRequest())
            assert (reply.service, reply.instance_id, reply.ready) == (name, service.settings.instance_id, True)
            assert reply.version and reply.uptime_seconds >= 0
            info = await bus.js_api(f"STREAM.INFO.{Stream.EVENTS.value}", {"subjects_filter": HEARTBEAT})
            assert info["state"]["messages"] >= 1
        finally:
            await bus.close()
    finally:
        await service.stop()
    if service.schema:
        conn = await asyncpg.connect(empty_database_url)
        try:
            versions = [r[0] for r in await conn.fetch(f"SELECT version FROM {service.schema}.schema_migrations")]
            assert "common/0001_outbox" in versions
        finally:
            await conn.close()


async def test_heartbeat_carries_identity(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = build("sweeper", settings_factory(heartbeat_interval_seconds=0.2))
    nc = await nats.connect(service.settings.nats_url)
    sub = await nc.subscribe(HEARTBEAT)
    await service.start()
    try:
        msg = await sub.next_msg(timeout=5)
        env = EventEnvelope.model_validate_json(msg.data)
        assert env.type == "heartbeat" and env.data["service"] == "sweeper"
        assert env.data["instance_id"] == service.settings.instance_id
        assert env.data["lanes"] == ["maintenance"]
    finally:
        await service.stop()
        await nc.close()


async def test_a_graceful_stop_sends_the_retiring_beat_last(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # Without it a stopped instance stayed "registered" (then down) for an hour in Health.
    service = build("sweeper", settings_factory(heartbeat_interval_seconds=0.2))
    nc = await nats.connect(service.settings.nats_url)
    sub = await nc.subscribe(HEARTBEAT)
    await service.start()
    try:
        first = EventEnvelope.model_validate_json((await sub.next_msg(timeout=5)).data)
        assert (first.data["stopping"], first.data["interval_seconds"]) == (False, 0.2)
    finally:
        await service.stop()
    beats = []
    with contextlib.suppress(nats.errors.TimeoutError):
        while True:
            beats.append(EventEnvelope.model_validate_json((await sub.next_msg(timeout=1)).data).data)
    await nc.close()
    assert beats and beats[-1]["stopping"] is True and beats[-1]["instance_id"] == service.settings.instance_id
    assert [b for b in beats if b["stopping"]] == [beats[-1]]


async def test_migrate_is_idempotent_and_concurrent_safe(empty_database_url: str) -> None:
    results = await asyncio.gather(*(migrate(empty_database_url, "alerts", None) for _ in range(3)))
    assert sorted(len(r) for r in results) == [0, 0, 3]  # exactly one caller applied them
    assert await migrate(empty_database_url, "alerts", None) == []


async def test_edited_migration_refuses_to_start(empty_database_url: str, tmp_path: Path) -> None:
    database_url = empty_database_url
    pkg = tmp_path / "edited_migrations_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "0001_things.sql").write_text("CREATE TABLE sweeper.things (id int);")
    sys.path.insert(0, str(tmp_path))
    try:
        assert await migrate(database_url, "sweeper", "edited_migrations_pkg") == [
            "common/0001_outbox", "common/0002_outbox_event_id", "common/0003_idempotency_keys", "service/0001_things"]
        (pkg / "0001_things.sql").write_text(textwrap.dedent("CREATE TABLE sweeper.things (id bigint);"))
        with pytest.raises(MigrationError, match="edited after it was applied"):
            await migrate(database_url, "sweeper", "edited_migrations_pkg")
    finally:
        sys.path.remove(str(tmp_path))


async def test_stop_is_bounded_and_leaves_nothing_answering(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = build("alerts", settings_factory())
    await service.start()
    await asyncio.wait_for(service.stop(), timeout=service.settings.shutdown_grace_seconds + 5)
    bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=1)
    try:
        from zimmer_common.errors import ErrorCode, ZimmerError

        with pytest.raises(ZimmerError) as info:
            await bus.request(ping_rpc("alerts"), PingRequest(), timeout=0.5)
        assert info.value.code is ErrorCode.UNAVAILABLE
    finally:
        await bus.close()
