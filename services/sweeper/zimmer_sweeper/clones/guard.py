"""CloneReaper, the last guard before a clone's bytes go (seed 003, "The guard").

Every reaper builds an ownership snapshot and then spends minutes deleting from it; a session
unarchived, resumed or restarted in that gap is live by the time its turn comes (#808, #811 on
2026-09-02). So the guard asks spot-gate who owns the path at the instant of deletion, on core NATS
and bounded, and refuses if a live or reap-protected session does. It fails closed: an answer that
does not come (a timeout, an error, spot-gate down) is "protected", because a leaked clone costs
disk the next sweep reclaims, while a deleted live one costs work that exists nowhere else. The gap
left is the microseconds between the answer and the rename: the smallest available, not none.

Before the bytes go, the clone's Docker Compose resources are torn down (`compose`), only once the
first answer says nobody owns it (a live session's containers are never touched). A teardown can
take up to two minutes, so when one ran the guard asks again before the rename, keeping the gap as
small as it was. A teardown that fails pages and the removal goes on.

A refusal is never routine (a snapshot went stale and the guard caught it): it pages (the pager logs
it at ERROR), is recorded for the Disk and clones panel, and leaves a durable warning on each owning
session through spot-gate's API. It asks a second time after the tree is gone and before the clone's
transcript directory goes: a session resumed while the rm -rf ran re-clones at the same path, so a
changed (or missing) answer keeps the transcript for the transcript sweep to judge later.

`discard_created` is the rollback path for a directory the caller itself just made and is undoing:
no session's clone_path names it yet, so the guard has nothing to protect, and failing closed on a
database blip would leave a partial tree that makes the retried `git clone` fail for good
("destination path already exists"), turning a transient clone failure into a permanent one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.clones import (
    CLONE_OWNERSHIP,
    RECORD_SESSION_WARNING,
    CloneOwnership,
    CloneOwnershipQuery,
    SessionWarningIn,
)
from zimmer_common.logs import kv
from zimmer_common.pager import Pager
from zimmer_common.paging import page_or_log
from zimmer_sweeper.clones import compose
from zimmer_sweeper.disk.domain import is_tombstone
from zimmer_sweeper.disk.metrics import DiskMetrics
from zimmer_sweeper.disk.records import DiskRecords
from zimmer_sweeper.disk.removal import Removal, remove_atomically
from zimmer_sweeper.disk.volumes import Roots

log = logging.getLogger("zimmer.sweeper.guard")

ReapOutcome = Literal["removed", "refused", "unanswered", "absent", "fenced"]
TranscriptFate = Literal["reaped", "kept", "not_reached"]
TranscriptReaper = Callable[[Path], Awaitable[Any]]
REFUSED_KIND = "clone_reap_refused"


@dataclass(frozen=True)
class ReapResult:
    path: str
    outcome: ReapOutcome
    removal: Removal | None = None
    # refused: the sessions owning it; removed with the transcript kept: those that took it back
    session_ids: tuple[int, ...] = ()
    transcript: TranscriptFate = "not_reached"
    reason: str = ""

    @property
    def removed(self) -> bool:
        return self.outcome == "removed"


class CloneReaper:
    def __init__(self, *, bus: BusLink, roots: Roots, records: DiskRecords, pager: Pager | None,
                 metrics: DiskMetrics, reap_transcripts: TranscriptReaper | None = None,
                 timeout: float | None = None, compose_timeout: float = compose.COMPOSE_DOWN_TIMEOUT):
        self._bus = bus
        self.roots = roots
        self.records = records
        self.pager = pager
        self.metrics = metrics
        # helper-4's transcript reaper, injected: called with the clone's path once the clone is
        # gone and the second answer still says nobody took the path back.
        self.reap_transcripts = reap_transcripts
        self.timeout = timeout
        self.compose_timeout = compose_timeout

    async def remove_clone(self, path: Path | str, *, job: str) -> ReapResult:
        """Delete the clone at `path` unless a live or reap-protected session owns it now. Only a
        direct child of this host's clones base, and only where the fence lets this deployment
        delete; never a tombstone (those are reaped, not guarded)."""
        path = Path(path)
        fenced = self._fenced(path)
        if fenced:
            log.warning("clone not removed: outside what this deployment may delete",
                        extra=kv(path=str(path), job=job, reason=fenced))
            return ReapResult(str(path), "fenced", reason=fenced)
        if not os.path.lexists(path):
            return ReapResult(str(path), "absent")
        first = await self.ownership(path, job=job)
        if first is None:
            return await self._unanswered(path, job)
        if first.protected_by:
            return await self._refuse(path, job, first.protected_by)
        if (await self._teardown(path, job)).ran:
            again = await self.ownership(path, job=job)  # the teardown took time: ask again before the rename
            if again is None:
                return await self._unanswered(path, job)
            if again.protected_by:
                return await self._refuse(path, job, again.protected_by)
        removal = await remove_atomically(path, job=job)
        if removal is None:
            return ReapResult(str(path), "absent")
        return await self._after_removal(path, job, removal)

    async def discard_created(self, path: Path | str, *, job: str) -> Removal | None:
        """Roll back a directory the caller itself just created: straight to atomic removal."""
        return await remove_atomically(Path(path), job=job)

    async def ownership(self, path: Path, *, job: str) -> CloneOwnership | None:
        """Spot-gate's answer for one path, or None when none came (the caller fails closed)."""
        try:
            answer = await self._bus.bus.request(CLONE_OWNERSHIP, CloneOwnershipQuery(paths=[str(path)]),
                                                 timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - any doubt is "protected"
            log.warning("clone ownership not answered", extra=kv(path=str(path), job=job, error=str(exc)[:300]))
            return None
        mine = next((a for a in answer.answers if a.path == str(path)), None)
        if mine is not None and mine.drift:
            log.warning("clone path drift: matched by basename, stored clone_path elsewhere (#671)",
                        extra=kv(path=str(path), sessions=mine.drift, job=job))
        return mine

    async def _teardown(self, path: Path, job: str) -> compose.Teardown:
        torn = await compose.teardown(path, timeout=self.compose_timeout)
        if torn.ran:
            self.metrics.compose_teardowns.labels(job, torn.outcome).inc()
        if torn.failed:
            log.warning("compose teardown failed; the clone is removed all the same",
                        extra=kv(path=str(path), job=job, outcome=torn.outcome))
            message = (f"{job} tore down Docker Compose in {path} before removing it, and `docker compose down` "
                       f"{'timed out' if torn.outcome == 'timed_out' else 'failed'}: its containers, networks "
                       "and volumes may still be there (the clone was removed all the same)")
            context = {"path": str(path), "job": job, "outcome": torn.outcome, "host": self.records.host}
            pager = self.pager
            page = None if pager is None else (lambda title, msg, fingerprint, source, ctx: pager.report(
                title=title, fingerprint=fingerprint, message=msg, context=ctx, snippet_source=source))
            # page_or_log never raises: a page that cannot be sent must not keep the clone on disk.
            await page_or_log(page, "Compose teardown failed", message, ["sweeper", "compose_teardown", job],
                              snippet_source=torn.detail, **context)
        return torn

    def _fenced(self, path: Path) -> str:
        base = self.roots.sweepable("clones")
        if base is None:
            return self.roots.fence("clones").sentence
        if is_tombstone(path.name):
            return "a tombstone: reaped by the sweeps, never guarded as a clone"
        if Path(os.path.realpath(path.parent)) != base:
            return f"not directly under the clones base {base}"
        return ""

    async def _after_removal(self, path: Path, job: str, removal: Removal) -> ReapResult:
        second = await self.ownership(path, job=job)
        if second is None or second.protected_by:
            taken = tuple(second.protected_by) if second else ()
            self.metrics.transcripts_kept.labels(job).inc()
            log.warning("clone removed; its transcript is kept: the path was taken back while it was deleted"
                        if taken else "clone removed; its transcript is kept: the second question went unanswered",
                        extra=kv(path=str(path), sessions=list(taken), job=job))
            return ReapResult(str(path), "removed", removal, taken, "kept")
        if self.reap_transcripts is None:
            return ReapResult(str(path), "removed", removal)
        try:
            await self.reap_transcripts(path)
        except Exception as exc:  # noqa: BLE001 - the clone is gone either way; the transcript sweep retries
            log.warning("clone removed; reaping its transcript failed", extra=kv(path=str(path), job=job,
                                                                               error=repr(exc)[:300]))
            return ReapResult(str(path), "removed", removal, transcript="kept", reason=repr(exc)[:300])
        return ReapResult(str(path), "removed", removal, transcript="reaped")

    async def _unanswered(self, path: Path, job: str) -> ReapResult:
        reason = "spot-gate did not answer who owns it: failed closed, nothing deleted"
        self.metrics.refusals.labels(job, "unanswered").inc()
        await self._record(job, path, [], reason)
        await self._page(job, path, [], reason, kind="unanswered")
        return ReapResult(str(path), "unanswered", reason=reason)

    async def _refuse(self, path: Path, job: str, owners: list[int]) -> ReapResult:
        reason = (f"a live or reap-protected session owns it at the instant of deletion "
                  f"(sessions {', '.join(map(str, owners))}): {job}'s snapshot was stale")
        self.metrics.refusals.labels(job, "owned").inc()
        await self._record(job, path, owners, reason)
        await self._page(job, path, owners, reason, kind="owned")
        for sid in owners:
            await self._warn_session(sid, path, job)
        return ReapResult(str(path), "refused", session_ids=tuple(owners), reason=reason)

    async def _record(self, job: str, path: Path, owners: list[int], reason: str) -> None:
        try:
            await self.records.refusal(job, str(path), owners, reason)
        except Exception as exc:  # noqa: BLE001 - the refusal stands; the page still carries it
            log.warning("guard refusal not recorded", extra=kv(path=str(path), job=job, error=repr(exc)[:300]))

    async def _page(self, job: str, path: Path, owners: list[int], reason: str, *, kind: str) -> None:
        pager = self.pager
        if pager is None:
            await page_or_log(None, "Clone reap refused", f"{job} was about to delete {path}; the guard refused: "
                              f"{reason}", ["sweeper", REFUSED_KIND, kind, job], sessions=owners)
            return
        await pager.report(title="Clone reap refused", fingerprint=["sweeper", REFUSED_KIND, kind, job],
                           message=f"{job} was about to delete {path}; the guard refused: {reason}",
                           context={"path": str(path), "job": job, "sessions": owners, "kind": kind,
                                    "host": self.records.host})

    async def _warn_session(self, session_id: int, path: Path, job: str) -> None:
        warning = SessionWarningIn(
            session_id=session_id, kind=REFUSED_KIND, source=f"sweeper/{job}",
            message=f"{job} on {self.records.host} was about to delete this session's clone {path}; the guard "
                    "refused because the session is live or being unarchived. Nothing was deleted.")
        try:
            await self._bus.bus.request(RECORD_SESSION_WARNING, warning, timeout=self.timeout)
        except Exception as exc:  # noqa: BLE001 - the refusal stands without the warning
            log.warning("guard refusal stands, but its warning could not be left on the session",
                      extra=kv(session_id=session_id, path=str(path), job=job, error=str(exc)[:300]))
