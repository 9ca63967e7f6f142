"""WorkBacklogLivenessSweepJob (seed 000 "When a row leaves the queue and goes nowhere"; seed 003).

Hourly, it re-checks rows that LEFT the queue and records what GitHub says in liveness_state. It
changes no status and puts nothing back: a merged PR without a closing keyword is either finished
work or a deliberate remainder, and telling them apart is a judgement per issue. After the pass it
pages on lapsed holds and on the stranded population's band (`domain.bands`).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Text, and_, bindparam, case, column, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import aliased

from zimmer_backlog.domain import bands
from zimmer_backlog.domain.liveness import (
    GRACE,
    MAX_EXAMINED_PER_SWEEP,
    PROVISIONAL_REMOVALS,
    SETTLED,
    Verdict,
    classify,
    hold_survives,
)
from zimmer_backlog.handlers.github import GithubClient, IssueRef, Probe, issue_ref
from zimmer_backlog.metrics import BacklogMetrics
from zimmer_backlog.store import queue
from zimmer_backlog.store.tables import alert_marks, items, liveness_passes, produced
from zimmer_common.clock import Clock
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.unit_of_work import UnitsOfWork

log = logging.getLogger("zimmer.backlog.liveness")

BAND_MARK = "stranded"
PROBE_MARK = "probe"
HOLD_COLUMNS = ("held_at", "held_until", "held_by", "held_by_session_id", "hold_reason", "held_liveness_state")
NO_HOLD = {c: None for c in HOLD_COLUMNS}


_newer = aliased(items)
SUPERSEDED = exists().where(_newer.c.key == items.c.key, _newer.c.id > items.c.id)


def candidates(now: datetime, limit: int = MAX_EXAMINED_PER_SWEEP) -> Any:
    """Started rows whose session ended more than GRACE ago (or, for history whose session this
    backlog never heard of, that started that long ago), and rows removed on a reason with a shelf
    life. Verdicts that can still change first, settled ones last; least recently checked first."""
    over = now - GRACE
    started = and_(queue.is_(items.c.status, "started"),
                   or_(produced.c.ended_at < over, and_(produced.c.session_id.is_(None), items.c.started_at < over)))
    removed = and_(queue.is_(items.c.status, "removed"), items.c.removal_reason.in_(PROVISIONAL_REMOVALS))
    settled = case((items.c.liveness_state.in_([v.value for v in SETTLED]), 1), else_=0)
    return (select(items.c.id, items.c.key, items.c.issue_url, items.c.liveness_state,
                   SUPERSEDED.label("superseded"))
            .select_from(queue.WITH_SESSION)
            .where(items.c.issue_url.is_not(None), or_(started, removed))
            .order_by(settled, items.c.liveness_checked_at.asc().nulls_first(), items.c.id).limit(limit))


_VERDICTS = func.unnest(bindparam("ids", type_=ARRAY(BigInteger)), bindparam("vs", type_=ARRAY(Text)),
                        bindparam("void", type_=ARRAY(BigInteger))).table_valued(
    column("id", BigInteger), column("v", Text), column("void", BigInteger)).render_derived(name="w")


@dataclass
class PassReport:
    started_at: datetime
    examined: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    voided: list[str] = field(default_factory=list)  # keys whose hold the new evidence voided
    unreadable_repos: set[str] = field(default_factory=set)
    rate_limited: bool = False
    requests: int = 0
    stranded: int | None = None
    oldest_stranded_age: timedelta | None = None
    paged: list[str] = field(default_factory=list)  # band, lapse, band_store

    @property
    def read_everything(self) -> bool:
        return not self.unreadable_repos and not self.rate_limited


class LivenessSweep:
    def __init__(self, units: UnitsOfWork, github: GithubClient, pager: Pager, clock: Clock,
                 metrics: BacklogMetrics | None = None):
        self._units = units
        self._github = github
        self._pager = pager
        self.clock = clock
        self.metrics = metrics

    async def run(self) -> PassReport:
        now = self.clock.now()
        report = PassReport(started_at=now)
        async with self._units.begin() as uow:
            pass_id = (await uow.conn.execute(insert(liveness_passes).values(started_at=now)
                                              .returning(liveness_passes.c.id))).scalar_one()
            rows = list((await uow.conn.execute(candidates(now))).all())
        verdicts = await self._judge(rows, now, report)
        await self._record(verdicts, now, report)
        async with self._units.read() as conn:
            report.stranded, oldest = await population(conn, now)
        report.oldest_stranded_age = None if oldest is None else now - oldest
        if report.read_everything:  # a pass that could not read a repo says nothing at all
            await self._alert(now, report)
        await self._finish(pass_id, report)
        return report

    async def _judge(self, rows: list[Any], now: datetime, report: PassReport) -> dict[int, Verdict]:
        verdicts: dict[int, Verdict] = {}
        to_probe: dict[int, IssueRef] = {}
        for r in rows:
            ref = issue_ref(r.issue_url)
            if r.superseded:
                verdicts[r.id] = Verdict.SUPERSEDED
            elif ref is None:
                verdicts[r.id] = Verdict.UNKNOWN  # a URL written before the issue-URL rule; nothing to ask
            else:
                to_probe[r.id] = ref
        probe: Probe = await self._github.probe(to_probe.values()) if to_probe else Probe()
        report.requests, report.unreadable_repos = probe.requests, set(probe.unreadable_repos)
        report.rate_limited = probe.rate_limited is not None
        for item_id, ref in to_probe.items():
            evidence = probe.evidence.get(ref)
            verdicts[item_id] = Verdict.UNKNOWN if evidence is None else classify(evidence, now)
        report.examined = len(verdicts)
        report.verdicts = Counter(v.value for v in verdicts.values())
        if probe.rate_limited is not None:
            log.warning("liveness sweep stopped: GitHub's rate limit is spent; the rows not read are unknown",
                        extra=kv(not_read=len(probe.unreadable), reset_at=probe.rate_limited.reset_at))
        return verdicts

    async def _record(self, verdicts: dict[int, Verdict], now: datetime, report: PassReport) -> None:
        """Every verdict in one transaction. Whether a hold survives is judged on the row as it is
        now (locked), so a hold placed while GitHub was being read is judged too."""
        if not verdicts:
            return
        async with self._units.begin() as uow:
            held = (await uow.conn.execute(select(items.c.id, items.c.key, items.c.held_liveness_state)
                                           .where(items.c.id.in_(list(verdicts)), items.c.held_at.is_not(None))
                                           .with_for_update())).all()
            void = [r.id for r in held if not hold_survives(r.held_liveness_state, verdicts[r.id])]
            report.voided = sorted(r.key for r in held if r.id in void)
            ids = list(verdicts)
            stmt = update(items).where(items.c.id == _VERDICTS.c.id).values(
                liveness_state=_VERDICTS.c.v, liveness_checked_at=now,
                **{c: case((_VERDICTS.c.void == 1, None), else_=items.c[c]) for c in HOLD_COLUMNS})
            await uow.conn.execute(stmt, {"ids": ids, "vs": [verdicts[i].value for i in ids],
                                          "void": [int(i in void) for i in ids]})
        if report.voided:
            log.info("holds voided: the liveness sweep recorded a different verdict", extra=kv(keys=report.voided))

    async def _alert(self, now: datetime, report: PassReport) -> None:
        """Runs after every pass that read GitHub, even one with nothing to examine: a population
        that cleared forgets its band on the empty pass. One page a pass at most: the band's, or a
        lapse (which pages whatever band the sweep last paged for, once per hold, on the first pass
        that can read GitHub after its row is stranded again; only then is the spent hold cleared).
        A lapse that coincides with a band step is told in that one page."""
        async with self._units.read() as conn:
            lapsed = (await conn.execute(
                select(items.c.id, items.c.key, items.c.held_at, items.c.held_by, items.c.hold_reason,
                       queue.LEFT_QUEUE_AT.label("left_at"))
                .select_from(queue.WITH_SESSION)
                .where(queue.stranded(now), items.c.held_until.is_not(None)).order_by(items.c.id))).all()
        try:
            async with self._units.read() as conn:
                mark = await _read_mark(conn, BAND_MARK)
        except Exception as exc:  # noqa: BLE001 - paged in its own right
            await self._band_store_failed(exc, "read", report)
            mark, decision = None, bands.Decision(None, None)
            store_ok = False
        else:
            count, oldest = report.stranded or 0, report.oldest_stranded_age or timedelta(0)
            decision = bands.decide(count, oldest, mark, now)
            store_ok = True
            if decision.page is not None:
                try:
                    await self._probe_band_store(now)
                except Exception as exc:  # noqa: BLE001 - a store that cannot remember: no band page
                    await self._band_store_failed(exc, "write", report)
                    decision, store_ok = bands.Decision(None, mark), False
        if decision.page is None and not lapsed:
            if store_ok and decision.mark != mark:
                await self._remember(decision.mark, now, report)
            return
        band = decision.page or (mark.band if mark else bands.band_of(report.stranded or 0,
                                                                      report.oldest_stranded_age or timedelta(0)))
        page = await self._pager.report(**(self._lapse_page(lapsed, band, now) if lapsed else
                                             self._band_page(band, report, now)))
        if page is None:
            return  # not sent: nothing remembered and no hold cleared, so the next pass tries again
        report.paged.append("lapse" if lapsed else "band")
        if lapsed:
            async with self._units.begin() as uow:
                await uow.conn.execute(update(items).where(items.c.id.in_([r.id for r in lapsed]),
                                                           items.c.held_until <= now).values(**NO_HOLD))
        if store_ok and decision.mark != mark:
            await self._remember(decision.mark, now, report)

    @staticmethod
    def _lapse_page(lapsed: list[Any], band: bands.Band | None, now: datetime) -> dict[str, Any]:
        said = band.describe() if band else "below the alert's bar"
        return dict(
            title="Work backlog: a hold for a human decision lapsed; the decision is still owed",
            level="error", log_level="warning", source="backlog/liveness_sweep",
            fingerprint=["backlog", "hold_lapsed", said, now.isoformat()],
            message="; ".join(f"{r.key} (held by {r.held_by} on {r.held_at:%Y-%m-%d}: {r.hold_reason}) is stranded "
                              f"again, {(now - r.left_at).days} days since it left the queue" for r in lapsed)
                    + f". Stranded band: {said}.",
            context={"keys": [r.key for r in lapsed], "band": band.describe() if band else None})

    @staticmethod
    def _band_page(band: bands.Band, report: PassReport, now: datetime) -> dict[str, Any]:
        count, oldest = report.stranded or 0, report.oldest_stranded_age or timedelta(0)
        return dict(
            title=f"Work backlog: stranded rows unresolved for {band.describe()}",
            level="error", log_level="warning", source="backlog/liveness_sweep",
            # Every page is its own issue: the band, then the pass's time (seed: #1175).
            fingerprint=["backlog", "stranded", f"{band.weeks}w", f"{band.rows}+", now.isoformat()],
            message=(f"{count} work backlog rows left the queue and nothing resolves them; the oldest has waited "
                     f"{oldest.days} days. Triage them on the Issues view (Stranded): put work back with "
                     "append_work_backlog_item, close or remove what is done, or hold a row for the decision a "
                     "person owes."),
            context={"stranded": count, "oldest_days": oldest.days, "weeks": band.weeks, "row_band": band.rows})

    async def _remember(self, mark: bands.Mark | None, now: datetime, report: PassReport) -> None:
        try:
            async with self._units.begin() as uow:
                await _write_mark(uow.conn, BAND_MARK, mark, now)
        except Exception as exc:  # noqa: BLE001 - paged in its own right
            await self._band_store_failed(exc, "write", report)

    async def _probe_band_store(self, now: datetime) -> None:
        """Write a throwaway token to the probe key and read it back, before paging; the probe is a
        separate key so failing it can never leave a band written that no page went out for."""
        token = uuid.uuid4().hex
        async with self._units.begin() as uow:
            await uow.conn.execute(insert(alert_marks).values(name=PROBE_MARK, token=token, expires_at=now)
                                   .on_conflict_do_update(index_elements=[alert_marks.c.name],
                                                          set_={"token": token, "expires_at": now}))
        async with self._units.read() as conn:
            read = (await conn.execute(select(alert_marks.c.token).where(alert_marks.c.name == PROBE_MARK))
                    ).scalar_one_or_none()
        if read != token:
            raise RuntimeError("the band store did not remember the probe token")

    async def _band_store_failed(self, exc: BaseException, doing: str, report: PassReport) -> None:
        page = await self._pager.report(
            title="Work backlog: the stranded alert's band store cannot be used; the stranded alert is silent",
            level="error", fingerprint=["backlog", "stranded_band_store", doing, type(exc).__name__],
            message=f"The liveness sweep could not {doing} backlog.alert_marks, so it will not page for the "
                    "stranded band (an hourly page nothing can throttle would flood the channel). Fix the store; "
                    "until then read counts.stranded and the Issues view.",
            context={"error": repr(exc)[:500]}, snippet_source=exc, source="backlog/liveness_sweep")
        if page is not None:  # the pass's ledger row names every page it sent (issue 27 #8)
            report.paged.append("band_store")
        if self.metrics is not None:
            self.metrics.band_store_failures.inc()

    async def _finish(self, pass_id: int, report: PassReport) -> None:
        age = report.oldest_stranded_age
        async with self._units.begin() as uow:
            await uow.conn.execute(update(liveness_passes).where(liveness_passes.c.id == pass_id).values(
                finished_at=self.clock.now(), examined=report.examined, unknown=report.verdicts.get("unknown", 0),
                requests=report.requests, unreadable_repos=sorted(report.unreadable_repos),
                rate_limited=report.rate_limited, stranded=report.stranded,
                oldest_stranded_age_seconds=None if age is None else age.total_seconds(),
                paged=",".join(report.paged) or None))
        fields = kv(examined=report.examined, verdicts=dict(report.verdicts), requests=report.requests,
                    stranded=report.stranded, oldest_stranded_days=None if age is None else round(age / timedelta(days=1), 2),
                    unreadable_repos=sorted(report.unreadable_repos), rate_limited=report.rate_limited,
                    voided_holds=report.voided, paged=report.paged)
        # Production exports WARN and above (#584): WARN only when a repository could not be read.
        (log.info if report.read_everything else log.warning)("liveness sweep pass", extra=fields)
        if self.metrics is not None:
            self.metrics.observe_pass(report)


async def population(conn: AsyncConnection, now: datetime) -> tuple[int, datetime | None]:
    """The stranded population by its stored verdicts: how many, and when the oldest left the queue."""
    row = (await conn.execute(select(func.count(), func.min(queue.LEFT_QUEUE_AT))
                              .select_from(queue.WITH_SESSION).where(queue.stranded(now)))).one()
    return int(row[0]), row[1]


async def _read_mark(conn: AsyncConnection, name: str) -> bands.Mark | None:
    row = (await conn.execute(select(alert_marks).where(alert_marks.c.name == name))).first()
    return None if row is None else bands.Mark(bands.Band(row.weeks, row.row_band), row.expires_at)


async def _write_mark(conn: AsyncConnection, name: str, mark: bands.Mark | None, now: datetime) -> None:
    if mark is None:
        await conn.execute(delete(alert_marks).where(alert_marks.c.name == name))
        return
    values = {"weeks": mark.band.weeks, "row_band": mark.band.rows, "expires_at": mark.expires_at, "paged_at": now}
    await conn.execute(insert(alert_marks).values(name=name, **values)
                       .on_conflict_do_update(index_elements=[alert_marks.c.name], set_=values))
