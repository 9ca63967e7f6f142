"""The Disk and clones readings (issue 16's Health panel and get_system_health lines): every host's
roots as its free-space monitor last read them, the newest run of each disk sweep there, and the
guard's refusals in the last day. Read from the tables every sweeper shares, so any sweeper
answers for every host, and nothing touches a disk to answer."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common.contracts import disk as d
from zimmer_sweeper.disk.tables import DiskRefusalRow, DiskRootRow, DiskRunRow

REFUSAL_WINDOW = timedelta(hours=24)
# A reclaim that could not reach its target is the host's pressure state until a later one does,
# or until this long has passed with no reclaim at all (the monitor reclaims only under pressure).
PRESSURE_MEMORY = timedelta(hours=1)
RECLAIM_JOB = "reclaim_space"


RUNS: Any = DiskRunRow.__table__.c  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
ROOTS: Any = DiskRootRow.__table__.c  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation
REFUSALS: Any = DiskRefusalRow.__table__.c  # type: ignore[attr-defined]  # SQLModel sets __table__ at class creation


async def read(conn: AsyncConnection, now: datetime) -> d.DiskHealth:
    """Every host's readings, runs and refusals on `conn`: one snapshot (`UnitsOfWork.snapshot`), so a
    host's pressure is judged from the runs and readings of one moment."""
    runs, roots, refusals = RUNS, ROOTS, REFUSALS
    newest = (select(DiskRunRow).distinct(runs.host, runs.job)
              .order_by(runs.host, runs.job, runs.started_at.desc(), runs.id.desc()))
    refused = (select(refusals.host, func.count()).where(refusals.at > now - REFUSAL_WINDOW)
               .group_by(refusals.host))
    run_rows = (await conn.execute(newest)).all()
    root_rows = (await conn.execute(select(DiskRootRow).order_by(roots.host, roots.name))).all()
    refusal_counts = {host: int(n) for host, n in await conn.execute(refused)}
    hosts = sorted({r.host for r in run_rows} | {r.host for r in root_rows} | set(refusal_counts))
    disks = [_host(host, [r for r in root_rows if r.host == host], [r for r in run_rows if r.host == host],
                   refusal_counts.get(host, 0), now) for host in hosts]
    return d.DiskHealth(status=overall(disks), hosts=disks, lines=lines(disks))


def _host(host: str, roots: list[Any], runs: list[Any], refusals: int, now: datetime) -> d.HostDisk:
    views = [d.SweepRunView(job=r.job, started_at=r.started_at, finished_at=r.finished_at, outcome=r.outcome,
                            counts={k: int(v) for k, v in (r.counts or {}).items()}, bytes_freed=r.bytes_freed,
                            refusals=r.refusals, note=r.note) for r in runs]
    readings = [d.RootReading(name=r.name, path=r.path, exists=r.exists_now, free_bytes=r.free_bytes,
                              total_bytes=r.total_bytes, sweepable=r.sweepable, fence=r.fence) for r in roots]
    return d.HostDisk(host=host, read_at=max((r.read_at for r in roots), default=None), roots=readings, runs=views,
                      refusals_24h=refusals, pressure=pressure(views, now))


def pressure(runs: list[d.SweepRunView], now: datetime) -> str:
    """"unreachable" while the newest reclaim (within PRESSURE_MEMORY) could not reach its target;
    "reclaiming" while one is under way; otherwise "ok"."""
    reclaim = next((r for r in runs if r.job == RECLAIM_JOB), None)
    if reclaim is None or now - reclaim.started_at > PRESSURE_MEMORY:
        return "ok"
    if reclaim.finished_at is None:
        return "reclaiming"
    return "unreachable" if reclaim.counts.get("reached", 1) == 0 else "ok"


def overall(hosts: list[d.HostDisk]) -> str:
    """critical: a host's disk could not be brought back to its free-space target. warning: the
    guard refused a deletion in the last day (each paged; never routine), a sweep's newest run
    failed, or a configured root is missing. ok otherwise (no host reporting is ok: nothing is
    configured to sweep)."""
    if any(h.pressure == "unreachable" for h in hosts):
        return "critical"
    if any(h.refusals_24h or any(r.outcome == "failed" for r in h.runs)
           or any(root.path is not None and not root.exists for root in h.roots) for h in hosts):
        return "warning"
    return "ok"


def lines(hosts: list[d.HostDisk]) -> list[str]:
    """The prose get_system_health shows: one line per host, one per root, one per sweep."""
    if not hosts:
        return ["Disk and clones: no sweeper has read a disk yet (no roots configured, or none started)."]
    out: list[str] = []
    for h in hosts:
        out.append(f"Disk on {h.host}: pressure {h.pressure}; {h.refusals_24h} guard refusal"
                   f"{'s' if h.refusals_24h != 1 else ''} in the last 24 h.")
        for root in h.roots:
            if root.path is None:
                out.append(f"  {root.name}: not configured.")
            elif not root.exists:
                out.append(f"  {root.name} ({root.path}): missing.")
            else:
                out.append(f"  {root.name} ({root.path}): {_size(root.free_bytes)} free of {_size(root.total_bytes)}"
                           f"{'' if root.sweepable else f'; not swept here: {root.fence}'}.")
        for run in h.runs:
            counts = ", ".join(f"{k} {v}" for k, v in sorted(run.counts.items()))
            out.append(f"  {run.job}: {run.outcome} at {run.started_at:%Y-%m-%d %H:%M} UTC"
                       f"{f' ({counts})' if counts else ''}, {_size(run.bytes_freed)} freed"
                       f"{f', {run.refusals} refused' if run.refusals else ''}. {run.note}".rstrip())
    return out


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
