"""Across a NATS kill -9 and restart: no report lost or doubled, and a command whose ack was lost
is acked on its redelivery without reaching the runtime's handler again."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import nats
import pytest
from nats_control import KillableNats
from prometheus_client import CollectorRegistry
from runtime_stack import eventually, next_command, sample, spawn

from zimmer_runtime import LogLine, RuntimeClient

REPORTS = 240
OUTPUT_TOKENS = 1_000  # $0.075 a report at Opus's $75/M output
LINES_PER_BATCH = 3


async def test_reports_survive_a_nats_restart_once_each(gateway: httpx.AsyncClient, runtime: RuntimeClient,
                                                        registry: CollectorRegistry,
                                                        killable_nats: KillableNats) -> None:
    session = await spawn(gateway)
    await runtime.request_turn(session["id"], "first_start", prompt="go")
    await (await next_command(runtime.commands())).ack()
    sid = session["id"]

    async def produce() -> None:
        for i in range(REPORTS):
            await runtime.report_spend(request_id=f"req-{i}", session_id=sid, harness="claude_code",
                                       model="claude-opus-4", output_tokens=OUTPUT_TOKENS)
            await runtime.send_log_lines([LogLine(sid, "info", f"report {i} line {j}") for j in range(LINES_PER_BATCH)])
            await asyncio.sleep(0.01)

    producing = asyncio.create_task(produce())
    await asyncio.sleep(0.6)  # some reports are out, more are coming
    await killable_nats.kill()
    await asyncio.sleep(1.5)  # reports pile up in the local buffer meanwhile
    assert runtime.buffered > 0 and not runtime.connected
    await killable_nats.start()
    await asyncio.wait_for(producing, 30)
    assert await runtime.flush(60), f"{runtime.buffered} reports still buffered"
    assert sample(registry, "zimmer_runtime_reconnects_total") >= 1
    assert sample(registry, "zimmer_runtime_reports_dropped_total", kind="spend") == 0
    assert sample(registry, "zimmer_runtime_reports_sent_total", kind="spend") == REPORTS

    async def all_spend() -> float | None:
        try:
            dollars = (await gateway.get("/api/v1/costs")).json()["spend_five_hour_dollars"]
        except (httpx.HTTPError, KeyError):
            return None
        return dollars if dollars >= REPORTS * 0.075 - 1e-6 else None

    assert await eventually(all_spend, within=60, what="every spend report counted") == pytest.approx(REPORTS * 0.075)

    async def all_lines() -> list[str] | None:
        messages: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            resp = await gateway.get(f"/api/v1/sessions/{sid}/logs", params=params)
            if resp.status_code != 200:
                return None
            page = resp.json()
            messages += [line["message"] for line in page["lines"] if line["message"].startswith("report ")]
            cursor = page["next_cursor"]
            if not cursor:
                break
        return messages if len(messages) >= REPORTS * LINES_PER_BATCH else None

    messages = await eventually(all_lines, within=60, what="every log line readable")
    assert sorted(messages) == sorted(f"report {i} line {j}" for i in range(REPORTS) for j in range(LINES_PER_BATCH))
    await asyncio.sleep(1.0)  # anything doubled would have landed by now
    assert (await gateway.get("/api/v1/costs")).json()["spend_five_hour_dollars"] == pytest.approx(REPORTS * 0.075)
    assert len(await all_lines() or []) == REPORTS * LINES_PER_BATCH


async def test_a_command_whose_ack_was_lost_is_not_handled_twice(gateway: httpx.AsyncClient, runtime: RuntimeClient,
                                                                 registry: CollectorRegistry,
                                                                 killable_nats: KillableNats) -> None:
    session = await spawn(gateway)
    await runtime.request_turn(session["id"], "first_start", prompt="go")
    command = await next_command(runtime.commands())
    await killable_nats.kill()
    await command.ack()  # obeyed, but the ack cannot reach the server
    await killable_nats.start()

    handed_out: list[str] = []

    async def drain() -> None:
        async for again in runtime.commands():
            handed_out.append(again.id)

    draining = asyncio.create_task(drain())
    try:
        async def acked_as_duplicate() -> bool:
            return sample(registry, "zimmer_runtime_commands_total", kind="start_turn", outcome="duplicate") >= 1

        await eventually(acked_as_duplicate, within=30, what="the redelivery acked as a duplicate")
        assert handed_out == []  # the handler never saw it again

        async def queue_empty() -> bool:
            nc = await nats.connect(killable_nats.url)
            try:
                info = json.loads((await nc.request("$JS.API.CONSUMER.INFO.ZIMMER_RUNTIME.zimmer_runtime", b"",
                                                    timeout=5)).data)
            finally:
                await nc.close()
            return info.get("num_pending") == 0 and info.get("num_ack_pending") == 0

        await eventually(queue_empty, within=10, what="the command gone from the work queue")
    finally:
        draining.cancel()
        with pytest.raises(asyncio.CancelledError):
            await draining
