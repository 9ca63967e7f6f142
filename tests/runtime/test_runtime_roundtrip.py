"""A runtime built on zimmer_runtime alone, against the whole stack: it asks for a turn, obeys the
start_turn command, and reports status, spend, a quota reading, log lines and a clone; each lands
where the operator reads it (REST)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from runtime_stack import eventually, next_command, sample, spawn

from zimmer_runtime import Command, LogLine, RuntimeClient, RuntimeRequestError, StartTurn, WindowReadingIn


async def test_a_turn_its_command_and_every_report_land(gateway: httpx.AsyncClient, runtime: RuntimeClient,
                                                        registry: CollectorRegistry) -> None:
    session = await spawn(gateway, prompt="Fix the flaky test")
    assert session["status"] == "waiting"

    decision = await runtime.request_turn(session["id"], "first_start", prompt="Fix the flaky test")
    assert decision.outcome in ("admitted", "passed") and decision.starts
    command = await next_command(runtime.commands())
    assert isinstance(command.payload, StartTurn) and command.kind == "start_turn"
    assert (command.payload.session_id, command.payload.prompt) == (session["id"], "Fix the flaky test")
    assert command.delivered == 1
    await command.ack()

    now = datetime.now(UTC)
    await runtime.report_status(session["id"], "running")
    await runtime.report_clone(session["id"], f"/tmp/zimmer-clones/session-{session['id']}", host="host-a")
    await runtime.report_spend(request_id="req-1", session_id=session["id"], harness="claude_code",
                               model="claude-opus-4", output_tokens=1_000_000)
    await runtime.report_quota(account="acct-1", status="active", serving=True,
                               five_hour=WindowReadingIn(utilization=0.25, resets_at=now + timedelta(hours=3)),
                               seven_day=WindowReadingIn(utilization=0.1, resets_at=now + timedelta(days=4)))
    lines = [LogLine(session["id"], level, f"line {i}") for i, level in
             enumerate(["info", "warning", "error", "info", "verbose"])]
    await runtime.send_log_lines(lines)
    await runtime.report_status(session["id"], "needs_input")
    assert await runtime.flush(10)
    assert sample(registry, "zimmer_runtime_reports_sent_total", kind="spend") == 1
    assert sample(registry, "zimmer_runtime_reports_buffered") == 0

    async def settled() -> dict[str, Any] | None:
        s = (await gateway.get(f"/api/v1/sessions/{session['id']}")).json()
        return s if s["status"] == "needs_input" and s["clone_path"] else None

    s = await eventually(settled, what="status and clone applied")
    assert (s["clone_path"], s["clone_host"]) == (f"/tmp/zimmer-clones/session-{session['id']}", "host-a")

    async def spend_counted() -> float:
        costs = (await gateway.get("/api/v1/costs")).json()
        return costs["spend_five_hour_dollars"]

    assert await eventually(spend_counted, what="spend on /costs") == pytest.approx(75.0)

    async def reading_recorded() -> bool:
        policy = (await gateway.get("/api/v1/spot_policy")).json()
        return policy["accounts_in_pool"] == 1 and any(w["window"] == "five_hour" for w in policy["windows"])

    await eventually(reading_recorded, what="quota reading in the pool")

    async def logged() -> list[str]:
        page = (await gateway.get(f"/api/v1/sessions/{session['id']}/logs",
                                  params={"level": ["verbose", "info", "warning", "error"], "limit": 100})).json()
        mine = [line["message"] for line in page["lines"] if line["message"].startswith("line ")]
        return mine if len(mine) >= 5 else []

    assert await eventually(logged, what="log lines readable") == [f"line {i}" for i in range(5)]


async def test_a_follow_up_while_running_is_queued_and_a_wake_up_is_armed(gateway: httpx.AsyncClient,
                                                                         runtime: RuntimeClient) -> None:
    session = await spawn(gateway)
    first = await runtime.request_turn(session["id"], "first_start", prompt="go")
    assert first.starts
    await (await next_command(runtime.commands())).ack()
    follow = await runtime.request_turn(session["id"], "follow_up", prompt="and then this")
    assert (follow.outcome, follow.starts) == ("queued", False)
    again = await runtime.request_turn(session["id"], "follow_up", prompt="and then this",
                                       idempotency_key=follow.idempotency_key)
    assert again.outcome == "queued"  # the same key: the first answer, nothing queued twice
    assert (await gateway.get(f"/api/v1/sessions/{session['id']}")).json()["enqueued_messages"] == 1

    until = datetime.now(UTC) + timedelta(hours=1)
    view = await runtime.pause_until(session["id"], until, prompt="wake up and check CI")
    assert view.next_wake_at is not None and abs((view.next_wake_at - until).total_seconds()) < 1


async def test_refusals_carry_the_control_planes_code(runtime: RuntimeClient, gateway: httpx.AsyncClient) -> None:
    with pytest.raises(RuntimeRequestError) as refused:
        await runtime.request_turn(999_999, "first_start")
    assert refused.value.code == "not_found" and refused.value.details["idempotency_key"]


async def test_serve_commands_acks_what_the_handler_finished(gateway: httpx.AsyncClient,
                                                             runtime: RuntimeClient) -> None:
    seen: list[tuple[str, int]] = []
    failed_once: set[str] = set()

    async def obey(command: Command[Any]) -> None:
        if command.id not in failed_once:  # the first delivery fails: the command comes again
            failed_once.add(command.id)
            raise RuntimeError("the CLI did not start")
        seen.append((command.kind, command.payload.session_id))

    runtime.serve_commands(obey)
    session = await spawn(gateway)
    await runtime.request_turn(session["id"], "first_start", prompt="go")

    async def obeyed() -> bool:
        return seen == [("start_turn", session["id"])]

    await eventually(obeyed, what="the command handled after one failure")
