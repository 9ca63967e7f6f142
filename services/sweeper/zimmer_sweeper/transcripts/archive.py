"""TranscriptArchiveJob (seed 003's cron row; DESIGN §4): every 10 minutes, each host zips the
transcript directories of the sessions whose clones it holds into the JetStream object store
(bucket ZIMMER_TRANSCRIPTS, `sessions/<id>.zip`), so any gateway replica serves
`GET /api/v1/sessions/{id}/transcript.zip`, and keeps `latest.zip`, every session's zip in one.

- One session at a time, streamed file by file through a temporary file, and at most
  MAX_SESSIONS_PER_RUN a tick, each checkpointed as soon as its object is stored: loading every
  changed session at once is what OOM-killed the seed's worker every ten minutes (#719). 50 a tick
  is 300 an hour: the seed's largest backlog (6,612 directories) drains in under a day, while a
  tick at staging's ~5.4 MB a directory handles ~270 MB, a few seconds of deflate, well inside
  the 5-minute budget that also stops it. A tick that leaves changed sessions logs them as
  deferred at WARN; the next tick is the continuation.
- A session is due when its updated_at or the newest mtime anywhere in its transcript directories
  passes its checkpoint: subagent transcripts are files of their own and touch nothing else (#720).
  Each is compared with its own earlier reading, never one against the other: one comes from
  spot-gate's database clock, the other from this host's filesystem, and a skew between them
  would hide a change behind the other clock's later reading.
- latest.zip is rebuilt from the bucket's session zips whenever the checkpoints changed (a
  fingerprint of them is kept with it), by one host at a time (an advisory lock; a host that
  finds it taken leaves it to the holder): last writer wins, and each writer includes every
  session checkpointed when it starts. It costs a copy of the whole archive, so it runs only when
  something changed.
- A deleted session's zip and checkpoint go with it (`forget`, on session_deleted).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from nats.js.errors import NotFoundError
from nats.js.object_store import ObjectStore
from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.budget import BudgetExhausted, SweepBudget
from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.clones import SessionClone
from zimmer_common.contracts.disk import LATEST_OBJECT, TRANSCRIPT_BUCKET, SweepOutcome, session_transcript_object
from zimmer_common.logs import kv
from zimmer_common.objects import chunks, open_bucket, put_file
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_sweeper.clones.listing import all_clones
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.volumes import Roots
from zimmer_sweeper.transcripts.archive_zip import newest_in, session_directories, write_session_zip
from zimmer_sweeper.transcripts.tables import TranscriptArchiveRow, TranscriptLatestRow

log = logging.getLogger("zimmer.sweeper.archive")

JOB: Final = "transcript_archive"
MAX_SESSIONS_PER_RUN: Final = 50
BUDGET_SECONDS: Final = 300.0
LATEST_LOCK: Final = "zimmer.sweeper.transcript_latest"
BUCKET_DESCRIPTION: Final = "Session transcript zips (sessions/<id>.zip) and latest.zip, all of them in one"

A = TranscriptArchiveRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
L = TranscriptLatestRow.__table__  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation


@dataclass(frozen=True)
class Due:
    clone: SessionClone
    directories: list[str]
    newest: datetime  # the newest mtime in its transcript directories

    @property
    def order(self) -> tuple[datetime, int]:  # the longest-waiting change first
        return (min(self.newest, self.clone.updated_at), self.clone.session_id)


@dataclass
class ArchiveReport:
    outcome: SweepOutcome = "ok"
    counts: dict[str, int] = field(default_factory=dict)
    note: str = ""


class TranscriptArchive:
    def __init__(self, *, bus: BusLink, units: UnitsOfWork, roots: Roots,
                 records: DiskRecords, now: Callable[[], datetime], metrics: DiskMetrics, replicas: int = 1,
                 timeout: float | None = None, limit: int = MAX_SESSIONS_PER_RUN):
        self._bus = bus
        self.units = units
        self.roots = roots
        self.records = records
        self.now = now
        self.metrics = metrics
        self.replicas = replicas
        self.timeout = timeout
        self.limit = limit

    async def bucket(self) -> ObjectStore:
        return await open_bucket(self._bus.bus.js, TRANSCRIPT_BUCKET, replicas=self.replicas,
                                 description=BUCKET_DESCRIPTION)

    # ---- a tick -----------------------------------------------------------------------------

    async def run(self, budget: SweepBudget) -> ArchiveReport:
        started = self.now()
        report = await self._tick(budget)
        await self.records.run(JOB, started_at=started, outcome=report.outcome, counts=report.counts,
                               note=report.note)
        self.metrics.run_recorded(JOB, outcome=report.outcome, counts=report.counts, bytes_freed=0,
                                  finished_at=time.time())
        deferred = report.counts.get("deferred", 0)
        if deferred:
            log.warning("transcript archive: changed sessions deferred to the next tick",
                        extra=kv(host=self.records.host, note=report.note, **report.counts))
        else:
            (log.info if report.outcome == "ok" else log.warning)(
                "transcript archive", extra=kv(host=self.records.host, outcome=report.outcome, note=report.note,
                                               **report.counts))
        return report

    async def _tick(self, budget: SweepBudget) -> ArchiveReport:
        root = self.roots.path("transcripts")
        if root is None:
            return ArchiveReport("aborted", note="no transcripts root is configured on this host")
        try:
            clones = await all_clones(self._bus.bus, scope="all", host=self.records.host, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - the next tick asks again
            return ArchiveReport("aborted", note=f"spot-gate did not list this host's sessions ({str(exc)[:200]})")
        async with self.units.read() as conn:
            archived = await _checkpoints(conn, [c.session_id for c in clones])
        counts = {"sessions": len(clones), "no_transcript": 0, "unchanged": 0}
        due = await asyncio.to_thread(_due, str(root), clones, archived, counts)
        due.sort(key=lambda d: d.order)
        counts |= {"due": len(due), "archived": 0, "failed": 0, "bytes_archived": 0}
        try:
            store = await self.bucket()
        except Exception as exc:  # noqa: BLE001 - the next tick asks again
            return ArchiveReport("aborted", counts, f"the object store cannot be opened ({str(exc)[:200]})")
        for item in due[:self.limit]:
            try:
                budget.check()
            except BudgetExhausted:
                break
            try:
                counts["bytes_archived"] += await self._archive(store, str(root), item)
                counts["archived"] += 1
            except Exception as exc:  # noqa: BLE001 - one session's failure is logged; the others go on
                counts["failed"] += 1
                log.warning("session transcript not archived; the next tick tries again",
                            extra=kv(session_id=item.clone.session_id, error=repr(exc)[:300]))
        counts["deferred"] = len(due) - counts["archived"] - counts["failed"]
        counts |= await self.rebuild_latest(store)
        outcome: SweepOutcome = "partial" if counts["deferred"] or counts["failed"] else "ok"
        note = (f"{counts['archived']} of {counts['due']} changed session(s) archived "
                f"({counts['bytes_archived']:,} bytes); {counts['deferred']} deferred to the next tick")
        return ArchiveReport(outcome, counts, note)

    async def _archive(self, store: ObjectStore, root: str, item: Due) -> int:
        """One session: its zip through a temporary file into the bucket, then its checkpoint."""
        sid = item.clone.session_id
        name = session_transcript_object(sid)
        at = self.now()
        with tempfile.TemporaryFile(prefix=f"zimmer-transcript-{sid}-") as tmp:
            made = await asyncio.to_thread(write_session_zip, tmp, root, item.directories, item.clone, at)
            tmp.seek(0)
            info = await put_file(store, name, tmp, description=f"transcripts of session {sid}")
        row = dict(session_id=sid, host=self.records.host, session_updated_at=item.clone.updated_at,
                   newest_mtime=item.newest, archived_at=at, object_name=name, bytes=made.bytes,
                   files=made.files, directories=item.directories, digest=info.digest or "")
        async with self.units.begin() as uow:
            await uow.conn.execute(insert(A).values(**row).on_conflict_do_update(index_elements=[A.c.session_id],
                                                                             set_=row))
        log.info("session transcript archived", extra=kv(session_id=sid, object=name, bytes=made.bytes,
                                                         files=made.files, directories=item.directories))
        return made.bytes

    # ---- latest.zip -------------------------------------------------------------------------

    async def rebuild_latest(self, store: ObjectStore) -> dict[str, int]:
        """Rebuild latest.zip if the checkpoints changed since it was built; {} when it is current,
        `latest_busy` when another host holds the rebuild."""
        # A connection of its own, committing as it goes: it holds a session-level advisory lock
        # across the rebuild (raw SQL, as every lock), never a transaction open while it copies.
        async with self.units.read() as conn:
            rows = await _archived(conn)
            built = (await conn.execute(select(L.c.fingerprint).where(L.c.object_name == LATEST_OBJECT))).scalar()
            await conn.commit()
            if built == _fingerprint((r.session_id, r.digest) for r in rows):
                return {}
            if not (await conn.execute(text("SELECT pg_try_advisory_lock(hashtext(:k))"), {"k": LATEST_LOCK})).scalar():
                return {"latest_busy": 1}
            try:
                return await self._rebuild(conn, store, await _archived(conn))
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": LATEST_LOCK})
                await conn.commit()

    async def _rebuild(self, conn: AsyncConnection, store: ObjectStore, rows: list[Any]) -> dict[str, int]:
        await conn.commit()  # nothing held open while the archive is copied
        js = self._bus.bus.js
        included: list[tuple[int, str]] = []
        missing: list[int] = []
        stamp = self.now().timetuple()[:6]
        with tempfile.TemporaryFile(prefix="zimmer-transcripts-latest-") as tmp:
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
                for row in rows:
                    try:
                        info = await store.get_info(row.object_name)
                    except NotFoundError:
                        missing.append(row.session_id)
                        continue
                    with z.open(zipfile.ZipInfo(row.object_name, date_time=stamp), "w", force_zip64=True) as dest:
                        async for chunk in chunks(js, TRANSCRIPT_BUCKET, info):
                            await asyncio.to_thread(dest.write, chunk)
                    included.append((row.session_id, info.digest or ""))
            size = tmp.tell()
            tmp.seek(0)
            await put_file(store, LATEST_OBJECT, tmp,
                           description=f"every archived session's transcripts ({len(included)})")
        # Checkpointed but not in the bucket: the checkpoint goes, so the next tick archives the
        # session again if its transcript is still on disk.
        if missing:
            await conn.execute(delete(A).where(A.c.session_id.in_(missing)))
        # The fingerprint of what went in: a session archived meanwhile is in the checkpoints and
        # not in it, so the next tick rebuilds again.
        row = dict(object_name=LATEST_OBJECT, fingerprint=_fingerprint(included), built_at=self.now(),
                   built_by=self.records.host, entries=len(included), bytes=size)
        await conn.execute(insert(L).values(**row).on_conflict_do_update(index_elements=[L.c.object_name], set_=row))
        await conn.commit()
        log.info("latest.zip rebuilt", extra=kv(entries=len(included), bytes=size, missing=missing[:20]))
        return {"latest_rebuilt": 1, "latest_entries": len(included), "latest_missing": len(missing)}

    # ---- a deleted session ------------------------------------------------------------------

    async def forget(self, conn: AsyncConnection, session_id: int) -> None:
        """In the session_deleted consumer's transaction: the zip goes, then its checkpoint (a
        failed delete raises, and the event comes again). latest.zip follows at the next tick."""
        try:
            store = await self._bus.bus.js.object_store(TRANSCRIPT_BUCKET)
            await store.delete(session_transcript_object(session_id))
        except NotFoundError:
            pass
        await conn.execute(delete(A).where(A.c.session_id == session_id))


async def _checkpoints(conn: AsyncConnection, ids: list[int]) -> dict[int, tuple[datetime, datetime]]:
    if not ids:
        return {}
    rows = await conn.execute(select(A.c.session_id, A.c.session_updated_at, A.c.newest_mtime)
                              .where(A.c.session_id.in_(ids)))
    return {r.session_id: (r.session_updated_at, r.newest_mtime) for r in rows}


async def _archived(conn: AsyncConnection) -> list[Any]:
    return list((await conn.execute(select(A.c.session_id, A.c.object_name, A.c.digest)
                                    .order_by(A.c.session_id))).all())


def _fingerprint(entries: Iterable[tuple[int, str]]) -> str:
    """Which object of each session (by digest): latest.zip is current while this is unchanged."""
    h = hashlib.sha256()
    for session_id, digest in entries:
        h.update(f"{session_id}:{digest},".encode())
    return h.hexdigest()


def _due(root: str, clones: list[SessionClone], archived: dict[int, tuple[datetime, datetime]],
         counts: dict[str, int]) -> list[Due]:
    out = []
    for clone in clones:
        directories = session_directories(root, clone)
        if not directories:
            counts["no_transcript"] += 1
            continue
        newest = newest_in(root, directories)
        last = archived.get(clone.session_id)
        if last is not None and clone.updated_at <= last[0] and newest <= last[1]:
            counts["unchanged"] += 1
            continue
        out.append(Due(clone, directories, newest))
    return out
