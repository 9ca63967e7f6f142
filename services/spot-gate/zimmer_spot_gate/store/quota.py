"""The policy row, accounts and readings, the spend ledger, burn rates and calibration."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, false, func, insert, literal_column, select, true, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts.runtime import QuotaReadingIn, SpendReport
from zimmer_spot_gate.domain.accounts import AccountEntry
from zimmer_spot_gate.domain.gate import FleetState, Policy
from zimmer_spot_gate.domain.model import AccountReading, AccountStatus, Genesis, SchedulingClass, Window, WindowReading
from zimmer_spot_gate.domain.prices import TokenUsage
from zimmer_spot_gate.domain.pricing import BurnRate
from zimmer_spot_gate.store.tables import (
    accounts,
    burn_rates,
    quota_readings,
    sessions,
    spend_ledger,
    spot_policy,
    window_calibration,
)


@dataclass(frozen=True)
class PolicyRow:
    policy: Policy
    overrides: dict[Genesis, SchedulingClass]
    updated_at: datetime


POLICY = select(spot_policy)


async def policy(conn: AsyncConnection) -> PolicyRow:
    return _policy_row((await conn.execute(POLICY)).one())


def _policy_row(row: Any) -> PolicyRow:
    return PolicyRow(
        Policy(row.gating_enabled, {Window.FIVE_HOUR: row.reserve_five_hour, Window.SEVEN_DAY: row.reserve_seven_day},
               row.max_sessions),
        {Genesis(g): SchedulingClass(c) for g, c in (row.genesis_overrides or {}).items()}, row.updated_at)


SAVE_POLICY = update(spot_policy).values(updated_at=func.now())  # the other columns SET from the parameters


async def save_policy(conn: AsyncConnection, p: Policy, overrides: dict[Genesis, SchedulingClass]) -> None:
    await conn.execute(SAVE_POLICY, {
        "gating_enabled": p.gating_enabled, "reserve_five_hour": p.reserve[Window.FIVE_HOUR],
        "reserve_seven_day": p.reserve[Window.SEVEN_DAY], "max_sessions": p.max_sessions,
        "genesis_overrides": {g.value: c.value for g, c in overrides.items()}})


_serving = bindparam("is_serving", type_=accounts.c.serving.type)
_account = pg_insert(accounts).values(account=bindparam("a"), status=bindparam("s"),
                                      serving=func.coalesce(_serving, false()))
UPSERT_ACCOUNT = _account.on_conflict_do_update(index_elements=[accounts.c.account], set_={
    "status": _account.excluded.status, "serving": func.coalesce(_serving, accounts.c.serving),
    "updated_at": func.now()})
STOP_SERVING = update(accounts).where(accounts.c.account != bindparam("a")).values(serving=false())
INSERT_READING = insert(quota_readings)


async def record_reading(conn: AsyncConnection, r: QuotaReadingIn, now: datetime) -> None:
    await conn.execute(UPSERT_ACCOUNT, {"a": r.account, "s": r.status, "is_serving": r.serving})
    if r.serving:
        await conn.execute(STOP_SERVING, {"a": r.account})
    five, seven = r.five_hour, r.seven_day
    await conn.execute(INSERT_READING, {
        "account": r.account, "status": r.status,
        "five_hour_utilization": five.utilization if five else None,
        "five_hour_resets_at": five.resets_at if five else None,
        "seven_day_utilization": seven.utilization if seven else None,
        "seven_day_resets_at": seven.resets_at if seven else None, "read_at": r.read_at or now})


def _reading(row: Any) -> AccountReading:
    windows: dict[Window, WindowReading] = {}
    if row.five_hour_utilization is not None:
        windows[Window.FIVE_HOUR] = WindowReading(row.five_hour_utilization, row.five_hour_resets_at)
    if row.seven_day_utilization is not None:
        windows[Window.SEVEN_DAY] = WindowReading(row.seven_day_utilization, row.seven_day_resets_at)
    return AccountReading(row.account, AccountStatus(row.status), row.read_at, windows)


qr = quota_readings.c
READING = select(qr.account, qr.status, qr.five_hour_utilization, qr.five_hour_resets_at, qr.seven_day_utilization,
                 qr.seven_day_resets_at, qr.read_at)
NEWEST_READINGS = READING.ext(distinct_on(qr.account)).order_by(qr.account, qr.read_at.desc(), qr.id.desc())
POOL_SIZE = select(func.count()).select_from(accounts)
READINGS_SINCE = READING.where(qr.read_at >= bindparam("since")).order_by(qr.account, qr.read_at)


async def newest_readings(conn: AsyncConnection) -> tuple[list[AccountReading], int]:
    """Each account's newest reading, and how many accounts the pool has (read or not)."""
    rows = (await conn.execute(NEWEST_READINGS)).all()
    pool = (await conn.execute(POOL_SIZE)).scalar_one()
    return [_reading(r) for r in rows], int(pool)


ACCOUNTS = select(accounts.c.account, accounts.c.status, accounts.c.serving).order_by(accounts.c.account)


async def pool_accounts(conn: AsyncConnection) -> list[AccountEntry]:
    """Every account of the pool, read or not, with the status last reported."""
    return [AccountEntry(r.account, AccountStatus(r.status), bool(r.serving))
            for r in (await conn.execute(ACCOUNTS)).all()]


async def readings_since(conn: AsyncConnection, since: datetime) -> list[AccountReading]:
    rows = (await conn.execute(READINGS_SINCE, {"since": since})).all()
    return [_reading(r) for r in rows]


sess, burn = sessions.c, burn_rates.c
# Each running session's burn in the gate's currency; one whose harness + model has no rate yet
# counts the fallback (the mean Claude rate, `pricing.fallback_burn`), as a candidate would.
FLEET = (select(func.count().label("slots"),
                func.coalesce(func.sum(func.coalesce(burn.opus_dollars_per_minute,
                                                     bindparam("fallback_burn", type_=burn.opus_dollars_per_minute.type))),
                              0).label("burn"))
         .select_from(sessions.outerjoin(burn_rates, (burn.harness == sess.harness) & (burn.model == sess.model)))
         # Literals, as before: `status = 'running'` is a partial index's predicate, a parameter is not.
         .where(sess.status == literal_column("'running'"), sess.runtime == literal_column("'claude_code'"),
                ~sess.is_status_summary_fork))


async def fleet(conn: AsyncConnection, fallback_burn: float = 0.0) -> FleetState:
    """Running Claude Code sessions of any class and their burn: not Codex (it spends nothing
    against a Claude window), not status-summary forks (seconds-long bookkeeping)."""
    row = (await conn.execute(FLEET, {"fallback_burn": fallback_burn})).one()
    return FleetState(int(row.slots), float(row.burn))


_fleet = FLEET.subquery("fleet")
POLICY_AND_FLEET = select(spot_policy, _fleet.c.slots, _fleet.c.burn).select_from(spot_policy.join(_fleet, true()))


async def policy_and_fleet(conn: AsyncConnection, fallback_burn: float = 0.0) -> tuple[PolicyRow, FleetState]:
    """`policy` and `fleet` in one round trip (a batch of admissions reads both under the lock)."""
    row = (await conn.execute(POLICY_AND_FLEET, {"fallback_burn": fallback_burn})).one()
    return _policy_row(row), FleetState(int(row.slots), float(row.burn))


CAPACITIES = select(window_calibration.c.window_name, window_calibration.c.capacity_dollars)


async def capacities(conn: AsyncConnection) -> dict[Window, float]:
    rows = (await conn.execute(CAPACITIES)).all()
    return {Window(r.window_name): float(r.capacity_dollars) for r in rows}


CALIBRATED_AT = select(window_calibration.c.window_name, window_calibration.c.calibrated_at)


async def calibrated_at(conn: AsyncConnection) -> dict[Window, datetime]:
    """When each calibrated window's capacity was last estimated."""
    rows = (await conn.execute(CALIBRATED_AT)).all()
    return {Window(r.window_name): r.calibrated_at for r in rows}


_calibration = pg_insert(window_calibration)
SAVE_CAPACITY = _calibration.on_conflict_do_update(index_elements=[window_calibration.c.window_name], set_={
    "capacity_dollars": _calibration.excluded.capacity_dollars,
    "observations": window_calibration.c.observations + 1, "calibrated_at": func.now()})


async def save_capacity(conn: AsyncConnection, window: Window, capacity: float) -> None:
    await conn.execute(SAVE_CAPACITY, {"window_name": window.value, "capacity_dollars": capacity})


RECORD_SPEND = (pg_insert(spend_ledger).on_conflict_do_nothing(index_elements=[spend_ledger.c.request_id])
                .returning(true()))


async def record_spend(conn: AsyncConnection, s: SpendReport, dollars: float, now: datetime) -> bool:
    """False when this request_id was already recorded (ingest is idempotent on it)."""
    row = (await conn.execute(RECORD_SPEND, {
        "request_id": s.request_id, "session_id": s.session_id, "harness": s.harness, "model": s.model,
        "input_tokens": s.input_tokens, "output_tokens": s.output_tokens, "cache_write_tokens": s.cache_write_tokens,
        "cache_read_tokens": s.cache_read_tokens, "dollars": dollars, "at": s.at or now})).first()
    return row is not None


ledger = spend_ledger.c
_TOKENS = (func.sum(ledger.input_tokens).label("i"), func.sum(ledger.output_tokens).label("o"),
           func.sum(ledger.cache_write_tokens).label("cw"), func.sum(ledger.cache_read_tokens).label("cr"))
USAGE_BY_MODEL = (select(ledger.harness, ledger.model, *_TOKENS).where(ledger.at >= bindparam("s"))
                  .group_by(ledger.harness, ledger.model))


def _usage(r: Any) -> TokenUsage:
    return TokenUsage(int(r.i), int(r.o), int(r.cw), int(r.cr))


async def usage_by_model_since(conn: AsyncConnection, since: datetime) -> list[tuple[str, str, TokenUsage]]:
    """Tokens spent since `since`, per harness and model (for calibration in the gate's currency)."""
    rows = (await conn.execute(USAGE_BY_MODEL, {"s": since})).all()
    return [(r.harness, r.model, _usage(r)) for r in rows]


SPEND_BY_MODEL = (select(ledger.harness, ledger.model, func.sum(ledger.dollars).label("dollars"))
                  .where(ledger.at >= bindparam("s")).group_by(ledger.harness, ledger.model))


async def spend_by_model_since(conn: AsyncConnection, since: datetime) -> list[tuple[str, str, float]]:
    """List-price dollars spent since `since`, per harness and model (the Costs page splits Claude
    from Codex spend)."""
    rows = (await conn.execute(SPEND_BY_MODEL, {"s": since})).all()
    return [(r.harness, r.model, float(r.dollars)) for r in rows]


_per_session = (select(ledger.session_id, ledger.harness, ledger.model, func.sum(ledger.dollars).label("dollars"),
                       *_TOKENS, func.min(ledger.at).label("first_at"), func.max(ledger.at).label("last_at"),
                       func.row_number().over(partition_by=(ledger.harness, ledger.model),
                                              order_by=func.max(ledger.at).desc()).label("n"))
                .where(ledger.session_id.is_not(None)).group_by(ledger.session_id, ledger.harness, ledger.model)
                .subquery("x"))
SESSION_SPENDS = select(*(c for c in _per_session.c if c.name != "n")).where(_per_session.c.n <= bindparam("k"))


async def session_spends(conn: AsyncConnection, per_combination: int) -> list[tuple[Any, TokenUsage]]:
    """Per session: dollars, tokens and first/last spend, the newest `per_combination` of each harness+model."""
    return [(r, _usage(r)) for r in (await conn.execute(SESSION_SPENDS, {"k": per_combination})).all()]


_burn = pg_insert(burn_rates)
SAVE_BURN_RATE = _burn.on_conflict_do_update(index_elements=[burn.harness, burn.model], set_={
    "dollars_per_minute": _burn.excluded.dollars_per_minute,
    "opus_dollars_per_minute": _burn.excluded.opus_dollars_per_minute,
    "sessions_counted": _burn.excluded.sessions_counted, "computed_at": func.now()})


async def save_burn_rates(conn: AsyncConnection, rates: dict[tuple[str, str], BurnRate]) -> None:
    if rates:
        await conn.execute(SAVE_BURN_RATE, [
            {"harness": harness, "model": model, "dollars_per_minute": r.dollars_per_minute,
             "opus_dollars_per_minute": r.currency_per_minute, "sessions_counted": r.sessions_counted}
            for (harness, model), r in rates.items()])


ALL_BURN_RATES = select(burn_rates).order_by(burn.harness, burn.model)


async def all_burn_rates(conn: AsyncConnection) -> list[Any]:
    return list((await conn.execute(ALL_BURN_RATES)).all())


NEWEST_READING_TIMES = (select(accounts.c.account, accounts.c.serving, func.max(qr.read_at).label("newest"))
                        .select_from(accounts.outerjoin(quota_readings, qr.account == accounts.c.account))
                        .group_by(accounts.c.account, accounts.c.serving))


async def newest_reading_times(conn: AsyncConnection) -> tuple[str | None, dict[str, datetime | None]]:
    rows = (await conn.execute(NEWEST_READING_TIMES)).all()
    serving = next((r.account for r in rows if r.serving), None)
    return serving, {r.account: r.newest for r in rows}


WINDOW_SPAN = {Window.FIVE_HOUR: timedelta(hours=5), Window.SEVEN_DAY: timedelta(days=7)}
