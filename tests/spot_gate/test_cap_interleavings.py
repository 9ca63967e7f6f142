"""The session cap over random interleavings, against the real service (PostgreSQL, NATS, the
admission batches, the ceiling sweep): spawns and bursts of spawns, follow-ups, the runtime's status
reports, quota readings present, missing, stale (their windows rolled over) and windowless,
re-checks, sweeps, the cap moved, the clock moved (issue 25).

Seed 004 "The concurrency limit": "It is checked when a session starts and never again. Lowering
the limit under a running fleet holds the next start; it never interrupts work already underway";
"A free slot … Skipped only for a session that is already running when the gate runs". So after
every step:

- every spot session that started in it started into a free slot: the spot sessions newly
  running are at most the slots that were free before the step (priority work is never held, and
  a session already running, at its turn boundary, keeps the slot it has);
- running spot sessions never exceed `max_sessions`, except those already running when the cap
  was lowered.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.runtime import QuotaReadingIn, SessionStatusReport, WindowReadingIn
from zimmer_common.errors import ZimmerError
from zimmer_spot_gate.handlers.turns import TurnRequest
from zimmer_spot_gate.store import sessions as store

STEP = st.one_of(
    st.tuples(st.just("spawn"), st.sampled_from(["api", "api", "web_ui", "codex"])),
    st.tuples(st.just("burst"), st.integers(2, 8)),
    st.tuples(st.just("follow_up"), st.integers(0, 40)),
    st.tuples(st.just("report"), st.integers(0, 40), st.sampled_from(["needs_input", "needs_input", "archived"])),
    st.tuples(st.just("reading"), st.sampled_from(["low", "high", "missing", "stale", "windowless"])),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("recheck")),
    st.tuples(st.just("cap"), st.integers(0, 5)),
    st.tuples(st.just("advance"), st.sampled_from([1, 11, 35, 65])),
)

# Deleted (not truncated: the service's own jobs read these tables meanwhile) between examples;
# a session's messages, decisions, wakes and warnings go with it.
TABLES = ("sessions", "quota_readings", "accounts", "idempotency_keys")


class Fleet:
    """The test's view of the service: the cap as set, and who was running when it was lowered."""

    def __init__(self, spot, cap: int):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        self.spot = spot
        self.cap = cap
        self.grandfathered: set[int] = set()
        self.ids: list[int] = []

    async def running(self) -> tuple[set[int], int]:
        """The running spot sessions that take a slot, and every slot taken."""
        rows = await self.spot.sql(
            "SELECT id, runtime, genesis, scheduling_class FROM spot_gate.sessions WHERE status = 'running' "
            "AND runtime = 'claude_code' AND NOT is_status_summary_fork")
        spot = {r.id for r in rows if (r.scheduling_class or ("priority" if r.genesis == "web_ui" else "spot")) == "spot"}
        return spot, len(rows)

    def pick(self, i: int) -> int | None:
        return self.ids[i % len(self.ids)] if self.ids else None

    async def spawn(self, genesis: str) -> None:
        kw = {"runtime": "codex", "harness": "codex", "model": "gpt-5-codex", "genesis": "api"} \
            if genesis == "codex" else {"genesis": genesis}
        self.ids.append((await self.spot.bus.request(c.SPAWN, c.SpawnSession(prompt="go", **kw))).session.id)

    async def step(self, op: tuple) -> None:  # type: ignore[type-arg]  # hypothesis's steps, of several shapes
        spot, kind = self.spot, op[0]
        if kind == "spawn":
            await self.spawn(op[1])
        elif kind == "burst":
            await asyncio.gather(*(self.spawn("api") for _ in range(op[1])))
        elif kind == "follow_up" and (sid := self.pick(op[1])) is not None:
            with contextlib.suppress(ZimmerError):  # an ended session takes no turn
                await spot.app.request_turn(c.RequestTurn(session_id=sid, kind="follow_up", prompt="more"))
        elif kind == "report" and (sid := self.pick(op[1])) is not None:
            with contextlib.suppress(ZimmerError):  # an illegal move is refused, nothing changes
                await spot.app.report_status(SessionStatusReport(session_id=sid, status=op[2]))
        elif kind == "reading":
            await self.reading(op[1])
        elif kind == "sweep":
            await spot.app.ceiling.run()
        elif kind == "recheck":
            async with spot.service.engine.begin() as conn:
                due = await store.due_holds(conn, spot.clock.now(), 500)
                await spot.app.gate.process(conn, [TurnRequest(sid, recheck=True) for sid in due])
        elif kind == "cap":
            if op[1] < self.cap:
                self.grandfathered |= (await self.running())[0]
            self.cap = op[1]
            await spot.app.policy.set(p.SetPolicy(max_sessions=op[1]))
        elif kind == "advance":
            spot.clock.advance(timedelta(minutes=op[1]))

    async def reading(self, how: str) -> None:
        spot, now = self.spot, self.spot.clock.now()
        if how == "missing":
            await spot.sql("DELETE FROM spot_gate.quota_readings")
            await spot.sql("DELETE FROM spot_gate.accounts")
            return
        if how == "windowless":
            await spot.app.record_reading(QuotaReadingIn(account="acct-0", status="active", read_at=now))
            return
        u = {"low": 0.1, "high": 0.95, "stale": 0.95}[how]
        resets = now - timedelta(minutes=1) if how == "stale" else now + timedelta(hours=2)  # stale: rolled over
        await spot.app.record_reading(QuotaReadingIn(
            account="acct-0", status="active", read_at=now - (timedelta(hours=3) if how == "stale" else timedelta()),
            five_hour=WindowReadingIn(utilization=u, resets_at=resets),
            seven_day=WindowReadingIn(utilization=0.2, resets_at=now + timedelta(days=3))))


async def reset(spot, cap: int) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    for table in TABLES:
        await spot.sql(f"DELETE FROM spot_gate.{table}")
    await spot.app.policy.set(p.SetPolicy(max_sessions=cap, gating_enabled=True))


@given(st.integers(0, 4), st.lists(STEP, min_size=1, max_size=30))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
async def test_running_sessions_never_exceed_the_cap(spot, cap: int, steps: list[tuple]) -> None:  # type: ignore[no-untyped-def,type-arg]  # pytest fixtures are untyped; hypothesis's steps, of several shapes
    await reset(spot, cap)
    fleet = Fleet(spot, cap)
    for op in steps:
        before, taken = await fleet.running()
        await fleet.step(op)
        after, _ = await fleet.running()
        started = after - before
        assert len(started) <= max(0, fleet.cap - taken), (op, sorted(started), taken, fleet.cap)
        fleet.grandfathered &= after  # once it stops, it holds no slot to keep
        assert len(after - fleet.grandfathered) <= fleet.cap, (op, sorted(after), fleet.cap)
