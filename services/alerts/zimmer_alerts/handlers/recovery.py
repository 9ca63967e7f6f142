"""Queue recovery mode (seed 003 "Queue recovery mode"; DESIGN §4): halt the demand-side job lanes
(pollers, triggers, inference, maintenance, default) and leave auth running.

The halt is JetStream's own: every `jobs_<ctx>_<lane>` consumer of a demand-side lane on
ZIMMER_JOBS is paused with `$JS.API.CONSUMER.PAUSE` and a `pause_until` of the mode's expiry. A
durable consumer is shared by all replicas of a service, so one pause halts every replica, and
JetStream resumes it by itself at the deadline (path 1). Ticks keep arriving while it is paused
(enqueue and schedules keep working); only delivery stops. A server without consumer pause
(< 2.11, or one whose PAUSE answer does not say paused) is refused before anything is written:
the mode never reports a halt that is not happening.

Zimmer's own metadata (who, why, when it lifts, which consumers it paused) is one row in
`alerts.queue_recovery_mode`. `active` is computed from the clock (expires_at > now), so no
surface reports a halt whose window has elapsed, even before either path lifted it. Path 2 is the
`queue_recovery_expiry` job on the auth lane (the one lane the mode never pauses), every minute:
it lifts an elapsed mode as actor "ttl", and re-pauses a demand-side consumer that appeared
during the halt (a service started meanwhile creates its consumer unpaused).

Enter, extend and exit page (warning), each episode with its own fingerprint because an issue
notifies once, ever. Each also announces `queue_recovery_changed` (the status after it) in the
transaction that wrote the row: every gateway's live pages show, change or drop the banner at once
(issue 32 #1); the gateways time the expiry themselves (web/recovery_banner.py). Exit is never
gated and resumes every paused demand-side consumer, including ones paused by hand (reported as
such).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_alerts.store.recovery_tables import queue_recovery_mode as qrm
from zimmer_common.bus import Bus
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts import health as h
from zimmer_common.contracts.subjects import Stream
from zimmer_common.errors import ErrorCode, ZimmerError, unavailable
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.streams import parse_version
from zimmer_common.unit_of_work import UnitsOfWork

log = logging.getLogger("zimmer.alerts.recovery")

DEMAND_LANES = ("pollers", "triggers", "inference", "maintenance", "default")
PAUSE_MIN_VERSION = (2, 11, 0)  # consumer pause arrived in nats-server 2.11
EXPIRY_JOB = "queue_recovery_expiry"
TTL_MIN, TTL_MAX = 5, 240  # minutes: every entry carries a TTL, clamped to 5 minutes to 4 hours
EXPIRY_LANE = "auth"  # the one lane recovery mode never pauses
TTL_ACTOR = "ttl"
LOCK_KEY = "zimmer.alerts.queue_recovery_mode"  # enter, exit and the expiry job, one at a time
JOBS = Stream.JOBS.value


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


class RecoveryMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.active = Gauge("zimmer_queue_recovery_mode_active", "1 while queue recovery mode halts the demand-side "
                            "job lanes", registry=registry)
        self.expires_at = Gauge("zimmer_queue_recovery_mode_expires_at_seconds", "When queue recovery mode lifts by "
                                "itself (unix time; 0 when it is off)", registry=registry)

    def show(self, status: h.QueueRecoveryStatus) -> None:
        self.active.set(1 if status.active else 0)
        self.expires_at.set(status.expires_at.timestamp() if status.active and status.expires_at else 0)


# ---- JetStream: the demand-side consumers and their pause ----------------------------------------

def supports_pause(bus: Bus) -> str | None:
    """None when the connected server can pause consumers; else why not."""
    version = str(bus.nc._server_info.get("version", "0.0.0"))  # noqa: SLF001 - nats-py exposes no accessor
    if parse_version(version) < PAUSE_MIN_VERSION:
        return f"NATS server {version} cannot pause consumers (needs nats-server >= 2.11)"
    return None


def lane_of(consumer: dict[str, Any]) -> str | None:
    """The job lane a `jobs_<ctx>_<lane>` consumer serves, from its filter `zimmer.jobs.<ctx>.<lane>.>`."""
    cfg = consumer.get("config", {})
    tokens = str(cfg.get("filter_subject") or "").split(".")
    if not str(consumer.get("name", "")).startswith("jobs_") or len(tokens) != 5 or tokens[:2] != ["zimmer", "jobs"]:
        return None
    return tokens[3]


async def job_consumers(bus: Bus) -> list[dict[str, Any]]:
    """Every consumer on ZIMMER_JOBS (the listing is paged by the server)."""
    found: list[dict[str, Any]] = []
    while True:
        resp = await bus.js_api(f"CONSUMER.LIST.{JOBS}", {"offset": len(found)})
        if "error" in resp:
            raise unavailable("message bus", f"cannot list the job consumers: {resp['error'].get('description')}")
        page = resp.get("consumers") or []
        found.extend(page)
        if not page or len(found) >= int(resp.get("total", 0)):
            return found


async def demand_consumers(bus: Bus) -> list[dict[str, Any]]:
    return [c for c in await job_consumers(bus) if lane_of(c) in DEMAND_LANES]


async def pause(bus: Bus, consumer: str, until: datetime | None) -> bool:
    """Pause until `until`, or resume (None: an empty request resumes). True when JetStream says
    the consumer is now in the wanted state."""
    resp = await bus.js_api(f"CONSUMER.PAUSE.{JOBS}.{consumer}", {"pause_until": rfc3339(until)} if until else {})
    if "error" in resp:
        return False
    return bool(resp.get("paused")) is (until is not None)


# ---- the row ------------------------------------------------------------------------------------

async def _row(conn: AsyncConnection) -> Any:
    return (await conn.execute(select(qrm).where(qrm.c.id == 1))).first()


def _status(row: Any, now: datetime) -> h.QueueRecoveryStatus:
    if row is None or row.exited_at is not None or row.expires_at <= now:
        return h.QueueRecoveryStatus(active=False)
    return h.QueueRecoveryStatus(active=True, entered_by=row.entered_by, reason=row.reason, entered_at=row.entered_at,
                                 expires_at=row.expires_at, lanes=list(row.lanes),
                                 paused_consumers=list(row.paused_consumers))


async def recovery_status(conn: AsyncConnection, now: datetime) -> h.QueueRecoveryStatus:
    """For the health report and the banner: active only while the window has not elapsed."""
    return _status(await _row(conn), now)


# ---- the operations -----------------------------------------------------------------------------

class QueueRecoveryMode:
    def __init__(self, units: UnitsOfWork, link: BusLink, clock: Clock, pager: Pager, metrics: RecoveryMetrics):
        self.units = units
        self.link = link
        self.clock = clock
        self.pager = pager
        self.metrics = metrics

    @property
    def bus(self) -> Bus:
        return self.link.bus

    async def status(self) -> h.QueueRecoveryStatus:
        async with self.units.read() as conn:
            status = await recovery_status(conn, self.clock.now())
        self.metrics.show(status)
        return status

    async def enter(self, req: h.EnterQueueRecoveryMode) -> h.QueueRecoveryStatus:
        now = self.clock.now()
        ttl = min(max(req.ttl_minutes, TTL_MIN), TTL_MAX)  # clamped, not refused (seed 003)
        expires_at = now + timedelta(minutes=ttl)
        why_not = supports_pause(self.bus)
        if why_not:
            raise ZimmerError(ErrorCode.REFUSED, f"{why_not}: queue recovery mode would report a halt that is not "
                              "happening, so it refuses", {"reason": "pause_unsupported"})
        async with self.units.begin() as uow:
            conn = uow.conn
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": LOCK_KEY})
            before = await _row(conn)
            extending = _status(before, now).active
            consumers = await demand_consumers(self.bus)
            paused: list[str] = []
            for c in consumers:
                if not await pause(self.bus, c["name"], expires_at):
                    await self._undo(paused, before.expires_at if extending else None)
                    raise ZimmerError(ErrorCode.REFUSED, f"JetStream did not pause consumer {c['name']}: queue "
                                      "recovery mode refuses rather than report a halt that is not happening",
                                      {"reason": "pause_failed", "consumer": c["name"]})
                paused.append(c["name"])
            lanes = sorted({lane_of(c) or "" for c in consumers} or set(DEMAND_LANES))
            values = dict(entered_by=req.actor, reason=req.reason, entered_at=now, expires_at=expires_at,
                          lanes=lanes, paused_consumers=sorted(paused), exited_at=None, exited_by=None)
            if extending:  # an extension keeps the episode's start and adds who extended it to the reason
                values.update(entered_at=before.entered_at,
                              reason=f"{before.reason} | extended by {req.actor}: {req.reason}")
            stmt = insert(qrm).values(id=1, **values)
            await conn.execute(stmt.on_conflict_do_update(index_elements=[qrm.c.id], set_=values))
            status = _status(await _row(conn), now)
            await uow.emit(h.QUEUE_RECOVERY_CHANGED, "queue_recovery_changed", status)
        self.metrics.show(status)
        word = "extended" if extending else "entered"
        clamped = "" if ttl == req.ttl_minutes else f", clamped from {req.ttl_minutes}"
        await self._page(f"Queue recovery mode {word}", status.entered_at, word,
                         f"{req.actor} {word} queue recovery mode until {rfc3339(expires_at)} "
                         f"({ttl} min{clamped}): {req.reason}. Demand-side lanes halted: {', '.join(lanes)}; "
                         f"consumers paused: {', '.join(sorted(paused)) or 'none yet'}. auth keeps running.",
                         {"expires_at": rfc3339(expires_at), "paused_consumers": sorted(paused), "actor": req.actor})
        log.warning("queue recovery mode %s", word, extra=kv(actor=req.actor, expires_at=rfc3339(expires_at),
                                                            consumers=paused))
        return status

    async def _undo(self, consumers: list[str], back_to: datetime | None) -> None:
        """A refused enter leaves JetStream as it found it: paused to the old deadline or resumed."""
        for name in consumers:
            try:
                await pause(self.bus, name, back_to)
            except ZimmerError:
                log.warning("could not undo a pause after a refused enter", extra=kv(consumer=name))

    async def exit(self, actor: str) -> h.QueueRecoveryStatus:
        """Resume every paused demand-side consumer (the mode's and any paused by hand) and stamp
        the row. Never gated; with nothing paused and nothing active it does nothing, quietly."""
        now = self.clock.now()
        async with self.units.begin() as uow:
            conn = uow.conn
            await conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": LOCK_KEY})
            row = await _row(conn)
            resumed: list[str] = []
            failed: list[str] = []
            for c in await demand_consumers(self.bus):
                if not c.get("paused"):
                    continue
                (resumed if await pause(self.bus, c["name"], None) else failed).append(c["name"])
            if failed:
                raise unavailable("message bus", f"JetStream did not resume {', '.join(failed)}; nothing recorded, "
                                  "exit again")
            ours = set(row.paused_consumers) if row is not None and row.exited_at is None else set()
            by_hand = sorted(set(resumed) - ours)
            was_on = row is not None and row.exited_at is None
            if was_on:
                await conn.execute(qrm.update().where(qrm.c.id == 1).values(exited_at=now, exited_by=actor))
            status = h.QueueRecoveryStatus(active=False, resumed_consumers=sorted(resumed), resumed_by_hand=by_hand)
            if was_on or resumed:
                await uow.emit(h.QUEUE_RECOVERY_CHANGED, "queue_recovery_changed", status)
        self.metrics.show(status)
        if was_on or resumed:
            who = ("its TTL elapsed (lifted by the TTL, not a person)" if actor == TTL_ACTOR
                   else f"lifted by {actor}")
            await self._page("Queue recovery mode lifted", row.entered_at if row is not None else now, "lifted",
                             f"Queue recovery mode is off: {who}. Resumed: {', '.join(sorted(resumed)) or 'none'}"
                             + (f" (paused by hand: {', '.join(by_hand)})" if by_hand else "")
                             + ". Waiting jobs drain now.",
                             {"actor": actor, "resumed": sorted(resumed), "resumed_by_hand": by_hand})
            log.warning("queue recovery mode lifted", extra=kv(actor=actor, resumed=resumed, by_hand=by_hand))
        return status

    async def expire(self) -> str:
        """Path 2 (the every-minute job): lift an elapsed mode as the TTL; while it is on, re-pause
        a demand-side consumer that is not paused (created during the halt). Returns what it did."""
        now = self.clock.now()
        async with self.units.read() as conn:
            row = await _row(conn)
        if row is None or row.exited_at is not None:
            self.metrics.show(h.QueueRecoveryStatus(active=False))
            return "off"
        if row.expires_at <= now:
            await self.exit(TTL_ACTOR)
            return "lifted"
        self.metrics.show(_status(row, now))
        missing = [c["name"] for c in await demand_consumers(self.bus) if not c.get("paused")]
        for name in missing:
            if await pause(self.bus, name, row.expires_at):
                log.warning("re-paused a demand-side consumer during queue recovery mode", extra=kv(consumer=name))
        return f"repaused {len(missing)}" if missing else "on"

    async def _page(self, title: str, episode: datetime | None, what: str, message: str,
                    context: dict[str, Any]) -> None:
        episode_key = rfc3339(episode or self.clock.now())
        await self.pager.report(title=title, level="warning", message=message, context=context,
                           fingerprint=["alerts", "queue_recovery_mode", what, episode_key,
                                        str(context.get("expires_at", ""))])
