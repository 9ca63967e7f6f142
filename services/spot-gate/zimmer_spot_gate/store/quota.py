"""The policy row, accounts and readings, the spend ledger, burn rates and calibration."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import QuotaReadingIn, SpendReport
from zimmer_spot_gate.domain.gate import FleetState, Policy
from zimmer_spot_gate.domain.model import (
    AccountReading, AccountStatus, Genesis, SchedulingClass, Window, WindowReading)


@dataclass(frozen=True)
class PolicyRow:
    policy: Policy
    overrides: dict[Genesis, SchedulingClass]
    updated_at: datetime


async def policy(conn: AsyncConnection) -> PolicyRow:
    row = (await conn.execute(text("SELECT * FROM spot_gate.spot_policy"))).one()
    return PolicyRow(
        Policy(row.gating_enabled, {Window.FIVE_HOUR: row.reserve_five_hour, Window.SEVEN_DAY: row.reserve_seven_day},
               row.max_sessions),
        {Genesis(g): SchedulingClass(c) for g, c in (row.genesis_overrides or {}).items()}, row.updated_at)


async def save_policy(conn: AsyncConnection, p: Policy, overrides: dict[Genesis, SchedulingClass]) -> None:
    import json

    await conn.execute(text("""
        UPDATE spot_gate.spot_policy SET gating_enabled = :g, reserve_five_hour = :r5, reserve_seven_day = :r7,
            max_sessions = :m, genesis_overrides = CAST(:o AS jsonb), updated_at = now()"""),
        {"g": p.gating_enabled, "r5": p.reserve[Window.FIVE_HOUR], "r7": p.reserve[Window.SEVEN_DAY],
         "m": p.max_sessions, "o": json.dumps({g.value: c.value for g, c in overrides.items()})})


async def record_reading(conn: AsyncConnection, r: QuotaReadingIn, now: datetime) -> None:
    await conn.execute(text("""
        INSERT INTO spot_gate.accounts (account, status, serving) VALUES (:a, :s, COALESCE(:serving, false))
        ON CONFLICT (account) DO UPDATE SET status = EXCLUDED.status,
            serving = COALESCE(:serving, spot_gate.accounts.serving), updated_at = now()"""),
        {"a": r.account, "s": r.status, "serving": r.serving})
    if r.serving:
        await conn.execute(text("UPDATE spot_gate.accounts SET serving = false WHERE account <> :a"), {"a": r.account})
    five, seven = r.five_hour, r.seven_day
    await conn.execute(text("""
        INSERT INTO spot_gate.quota_readings (account, status, five_hour_utilization, five_hour_resets_at,
            seven_day_utilization, seven_day_resets_at, read_at)
        VALUES (:a, :s, :u5, :r5, :u7, :r7, :at)"""),
        {"a": r.account, "s": r.status, "u5": five.utilization if five else None, "r5": five.resets_at if five else None,
         "u7": seven.utilization if seven else None, "r7": seven.resets_at if seven else None, "at": r.read_at or now})


def _reading(row: Any) -> AccountReading:
    windows: dict[Window, WindowReading] = {}
    if row.five_hour_utilization is not None:
        windows[Window.FIVE_HOUR] = WindowReading(row.five_hour_utilization, row.five_hour_resets_at)
    if row.seven_day_utilization is not None:
        windows[Window.SEVEN_DAY] = WindowReading(row.seven_day_utilization, row.seven_day_resets_at)
    return AccountReading(row.account, AccountStatus(row.status), row.read_at, windows)


async def newest_readings(conn: AsyncConnection) -> tuple[list[AccountReading], int]:
    """Each account's newest reading, and how many accounts the pool has (read or not)."""
    rows = (await conn.execute(text("""
        SELECT DISTINCT ON (account) account, status, five_hour_utilization, five_hour_resets_at,
            seven_day_utilization, seven_day_resets_at, read_at
        FROM spot_gate.quota_readings ORDER BY account, read_at DESC, id DESC"""))).all()
    pool = (await conn.execute(text("SELECT count(*) FROM spot_gate.accounts"))).scalar_one()
    return [_reading(r) for r in rows], int(pool)


async def readings_since(conn: AsyncConnection, since: datetime) -> list[AccountReading]:
    rows = (await conn.execute(text("""
        SELECT account, status, five_hour_utilization, five_hour_resets_at, seven_day_utilization,
            seven_day_resets_at, read_at
        FROM spot_gate.quota_readings WHERE read_at >= :since ORDER BY account, read_at"""), {"since": since})).all()
    return [_reading(r) for r in rows]


async def fleet(conn: AsyncConnection) -> FleetState:
    """Running Claude Code sessions of any class and their burn: not Codex (it spends nothing
    against a Claude window), not status-summary forks (seconds-long bookkeeping)."""
    row = (await conn.execute(text("""
        SELECT count(*) AS slots, COALESCE(sum(b.dollars_per_minute), 0) AS burn
        FROM spot_gate.sessions s
        LEFT JOIN spot_gate.burn_rates b ON b.harness = s.harness AND b.model = s.model
        WHERE s.status = 'running' AND s.runtime = 'claude_code' AND NOT s.is_status_summary_fork"""))).one()
    return FleetState(int(row.slots), float(row.burn))


async def capacities(conn: AsyncConnection) -> dict[Window, float]:
    rows = (await conn.execute(text("SELECT window_name, capacity_dollars FROM spot_gate.window_calibration"))).all()
    return {Window(r.window_name): float(r.capacity_dollars) for r in rows}


async def save_capacity(conn: AsyncConnection, window: Window, capacity: float) -> None:
    await conn.execute(text("""
        INSERT INTO spot_gate.window_calibration (window_name, capacity_dollars) VALUES (:w, :c)
        ON CONFLICT (window_name) DO UPDATE SET capacity_dollars = EXCLUDED.capacity_dollars,
            observations = spot_gate.window_calibration.observations + 1, calibrated_at = now()"""),
        {"w": window.value, "c": capacity})


async def record_spend(conn: AsyncConnection, s: SpendReport, dollars: float, now: datetime) -> bool:
    """False when this request_id was already recorded (ingest is idempotent on it)."""
    row = (await conn.execute(text("""
        INSERT INTO spot_gate.spend_ledger (request_id, session_id, harness, model, input_tokens, output_tokens,
            cache_write_tokens, cache_read_tokens, dollars, at)
        VALUES (:rid, :sid, :h, :m, :i, :o, :cw, :cr, :d, :at) ON CONFLICT (request_id) DO NOTHING RETURNING 1"""),
        {"rid": s.request_id, "sid": s.session_id, "h": s.harness, "m": s.model, "i": s.input_tokens,
         "o": s.output_tokens, "cw": s.cache_write_tokens, "cr": s.cache_read_tokens, "d": dollars,
         "at": s.at or now})).first()
    return row is not None


async def usage_by_model_since(conn: AsyncConnection, since: datetime) -> list[tuple[str, Any]]:
    """Tokens spent since `since`, per model (for Opus-denominated calibration)."""
    from zimmer_spot_gate.domain.pricing import TokenUsage

    rows = (await conn.execute(text("""
        SELECT model, sum(input_tokens) AS i, sum(output_tokens) AS o, sum(cache_write_tokens) AS cw,
               sum(cache_read_tokens) AS cr
        FROM spot_gate.spend_ledger WHERE at >= :s GROUP BY model"""), {"s": since})).all()
    return [(r.model, TokenUsage(int(r.i), int(r.o), int(r.cw), int(r.cr))) for r in rows]


async def spend_since(conn: AsyncConnection, since: datetime) -> float:
    return float((await conn.execute(text("SELECT COALESCE(sum(dollars), 0) FROM spot_gate.spend_ledger WHERE at >= :s"),
                                     {"s": since})).scalar_one())


async def session_spends(conn: AsyncConnection, per_combination: int) -> list[Any]:
    """Per session: dollars and first/last spend, the newest `per_combination` of each harness+model."""
    return list((await conn.execute(text("""
        SELECT session_id, harness, model, dollars, first_at, last_at FROM (
            SELECT session_id, harness, model, sum(dollars) AS dollars, min(at) AS first_at, max(at) AS last_at,
                   row_number() OVER (PARTITION BY harness, model ORDER BY max(at) DESC) AS n
            FROM spot_gate.spend_ledger WHERE session_id IS NOT NULL GROUP BY session_id, harness, model) x
        WHERE n <= :k"""), {"k": per_combination})).all())


async def save_burn_rates(conn: AsyncConnection, rates: dict[tuple[str, str], float], counts: dict[tuple[str, str], int]) -> None:
    for (harness, model), rate in rates.items():
        await conn.execute(text("""
            INSERT INTO spot_gate.burn_rates (harness, model, dollars_per_minute, sessions_counted) VALUES (:h, :m, :r, :n)
            ON CONFLICT (harness, model) DO UPDATE SET dollars_per_minute = EXCLUDED.dollars_per_minute,
                sessions_counted = EXCLUDED.sessions_counted, computed_at = now()"""),
            {"h": harness, "m": model, "r": rate, "n": counts.get((harness, model), 0)})


async def all_burn_rates(conn: AsyncConnection) -> list[Any]:
    return list((await conn.execute(text(
        "SELECT harness, model, dollars_per_minute, sessions_counted, computed_at FROM spot_gate.burn_rates "
        "ORDER BY harness, model"))).all())


async def newest_reading_times(conn: AsyncConnection) -> tuple[str | None, dict[str, datetime | None]]:
    rows = (await conn.execute(text("""
        SELECT a.account, a.serving, max(r.read_at) AS newest FROM spot_gate.accounts a
        LEFT JOIN spot_gate.quota_readings r ON r.account = a.account GROUP BY a.account, a.serving"""))).all()
    serving = next((r.account for r in rows if r.serving), None)
    return serving, {r.account: r.newest for r in rows}


WINDOW_SPAN = {Window.FIVE_HOUR: timedelta(hours=5), Window.SEVEN_DAY: timedelta(days=7)}
