"""Queued-message maintenance (seed 003 "Queued job maintenance"; DESIGN §4): preview, discard or
reschedule the messages waiting on the ZIMMER_JOBS work queue, scoped by lane and/or subject.

Eligible means waiting: in the stream and not yet delivered to a consumer. A message a worker
holds (ack pending, or nak'd and waiting for its redelivery) has a stream sequence at or below its
consumer's `delivered.stream_seq`; it is reported in `claimed`/`skipped` and never touched. On a
work-queue stream an acked message is gone, so history cannot be rewritten here by construction.

Guards, all before the first write ("no partial action"): a scope is required; the auth lane is
refused by name and again in the filter (a wildcard never reaches it), and so is the recovery-mode
expiry job on any lane (by job as well as by lane); schedule subjects
(`zimmer.jobs.schedule.…`) are never in scope; the cap (2,000) is checked on the scope's subjects
before anything is counted, so an over-cap scope cannot be confirmed into; `expected_count` must
equal the real count, and the refusal carries the preview so recovery is one retry.

ZIMMER_JOBS keeps one message per subject (ticks coalesce), so a subject's message is its last.
A discard is `STREAM.PURGE` of that subject with `seq` = the message's sequence + 1: exactly the
message that was counted, never a tick that replaced it meanwhile. A reschedule first publishes a
one-shot message schedule (`Nats-Schedule: @at <time>`, nats-server >= 2.12) on
`zimmer.jobs.schedule.deferred.<original subject without zimmer.jobs.>` targeting the original
subject, then purges the original; if the purge finds the message gone (claimed or replaced), the
schedule is withdrawn and the message reported skipped. The deferred subject is outside every
service's `zimmer.jobs.schedule.<ctx>.>`, so a service installing its schedules never removes it.
What is not transactional is the write itself: the claim check is re-read once just before the
writes, and a worker claiming a message inside that window (milliseconds) is not detectable.
"""

from __future__ import annotations

import base64
from collections import Counter as Tally
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from zimmer_alerts.handlers.recovery import job_consumers
from zimmer_common.bus import Bus
from zimmer_common.bus_link import BusLink
from zimmer_common.clock import Clock
from zimmer_common.contracts import health as h
from zimmer_common.contracts.subjects import SCHEDULE_PREFIX, Stream
from zimmer_common.errors import ErrorCode, ZimmerError, unavailable
from zimmer_common.lanes import LANES
from zimmer_common.paging import PageFn, page_or_log

JOBS = Stream.JOBS.value
JOBS_PREFIX = "zimmer.jobs."
DEFERRED_PREFIX = f"{SCHEDULE_PREFIX}.deferred"
OVER_CAP_SUBJECTS_SHOWN = 50  # an over-cap preview names this many subjects, not thousands


@dataclass(frozen=True)
class Waiting:
    subject: str
    seq: int

    @property
    def lane(self) -> str:
        return self.subject.split(".")[3]


def _lane_token(subject: str) -> str | None:
    tokens = subject.split(".")
    return tokens[3] if len(tokens) > 3 else None


def check_scope(scope: h.QueuedScope) -> str:
    """The stream filter for a scope, or a refusal (nothing read, nothing written)."""
    if not scope.lane and not scope.subject:
        raise ZimmerError(ErrorCode.INVALID, "name a lane or a subject (or both): there is no 'everything'",
                          {"field": "lane"})
    if scope.lane:
        if scope.lane in h.PROTECTED_LANES:
            raise ZimmerError(ErrorCode.REFUSED, f"the {scope.lane} lane is never maintained here: its jobs run "
                              "only when a person asks, and it carries the recovery-mode expiry", {"field": "lane"})
        if scope.lane not in LANES:
            raise ZimmerError(ErrorCode.INVALID, f"no lane {scope.lane!r}; lanes: {', '.join(sorted(LANES))}",
                              {"field": "lane"})
    if not scope.subject:
        return f"zimmer.jobs.*.{scope.lane}.>"
    subject = scope.subject
    tokens = subject.split(".")
    if not subject.startswith(JOBS_PREFIX) or len(tokens) < 3:
        raise ZimmerError(ErrorCode.INVALID, "subject must be under zimmer.jobs.", {"field": "subject"})
    if any(not t or any(ch.isspace() for ch in t) or (t != ">" and ">" in t) or (t != "*" and "*" in t)
           for t in tokens) or ">" in tokens[:-1]:
        raise ZimmerError(ErrorCode.INVALID, f"{subject!r} is not a NATS subject filter", {"field": "subject"})
    if tokens[2] == SCHEDULE_PREFIX.split(".")[2]:
        raise ZimmerError(ErrorCode.REFUSED, "schedule subjects (zimmer.jobs.schedule.…) are the cron table, "
                          "never queued work", {"field": "subject"})
    if len(tokens) > 3 and tokens[3] in h.PROTECTED_LANES:
        raise ZimmerError(ErrorCode.REFUSED, f"the {tokens[3]} lane is never maintained here", {"field": "subject"})
    if len(tokens) > 4 and tokens[4] in h.PROTECTED_JOBS:
        raise ZimmerError(ErrorCode.REFUSED, f"{tokens[4]} is never maintained here, on any lane: it is the backstop "
                          "that lifts queue recovery mode", {"field": "subject"})
    return subject


def _eligible(subject: str, lane: str | None) -> bool:
    """Filters what a wildcard matched: never a schedule, never a protected lane."""
    if subject.startswith(SCHEDULE_PREFIX + "."):
        return False
    token = _lane_token(subject)
    job = subject.split(".")[4] if subject.count(".") >= 4 else None
    return (token is not None and token not in h.PROTECTED_LANES and job not in h.PROTECTED_JOBS
            and (lane is None or token == lane))


def _counts(items: list[str]) -> list[h.Count]:
    return [h.Count(name=n, count=c) for n, c in sorted(Tally(items).items())]


def _receipt(action: str, done: list[Waiting], skipped: list[str],
             deliver_at: datetime | None = None) -> h.QueuedReceipt:
    """What a mutation did: a reschedule is recoverable (the work still happens), a discard is not."""
    return h.QueuedReceipt(action=action, recoverable=action == "reschedule", count=len(done),  # type: ignore[arg-type]  # pydantic validates the string into the literal
                           by_subject=_counts([w.subject for w in done]), by_lane=_counts([w.lane for w in done]),
                           skipped=_counts(skipped), deliver_at=deliver_at)


class QueuedMaintenance:
    def __init__(self, link: BusLink, clock: Clock, page: PageFn):
        self.link = link
        self.clock = clock
        self.page = page

    @property
    def bus(self) -> Bus:
        return self.link.bus

    async def _subjects(self, stream_filter: str, lane: str | None) -> list[str]:
        info = await self.bus.js_api(f"STREAM.INFO.{JOBS}", {"subjects_filter": stream_filter})
        if "error" in info:
            raise unavailable("message bus", f"cannot read ZIMMER_JOBS: {info['error'].get('description')}")
        return sorted(s for s in (info.get("state", {}).get("subjects") or {}) if _eligible(s, lane))

    async def _delivered(self) -> dict[str, int]:
        """Each job consumer's filter → the highest stream sequence it has delivered."""
        return {str(c.get("config", {}).get("filter_subject")): int(c.get("delivered", {}).get("stream_seq", 0))
                for c in await job_consumers(self.bus)}

    @staticmethod
    def _claimed(subject: str, seq: int, delivered: dict[str, int]) -> bool:
        return any(flt.endswith(".>") and subject.startswith(flt[:-1]) and seq <= upto for flt, upto in delivered.items())

    async def _message(self, subject: str) -> dict[str, Any] | None:
        resp = await self.bus.js_api(f"STREAM.MSG.GET.{JOBS}", {"last_by_subj": subject})
        return resp.get("message") if "error" not in resp else None

    async def survey(self, scope: h.QueuedScope) -> tuple[h.QueuedPreview, list[Waiting]]:
        stream_filter = check_scope(scope)
        subjects = await self._subjects(stream_filter, scope.lane)
        if len(subjects) > h.MAINTENANCE_CAP:  # the cap, before anything is counted
            shown = subjects[:OVER_CAP_SUBJECTS_SHOWN]
            return h.QueuedPreview(lane=scope.lane, subject=scope.subject, count=len(subjects),
                                   by_subject=_counts(shown), by_lane=_counts([_lane_token(s) or "" for s in subjects]),
                                   over_cap=True), []
        delivered = await self._delivered()
        waiting: list[Waiting] = []
        claimed: list[str] = []
        for subject in subjects:
            msg = await self._message(subject)
            if msg is None:
                continue  # taken and acked since the listing
            seq = int(msg["seq"])
            if self._claimed(subject, seq, delivered):
                claimed.append(subject)
            else:
                waiting.append(Waiting(subject, seq))
        preview = h.QueuedPreview(lane=scope.lane, subject=scope.subject, count=len(waiting),
                                  by_subject=_counts([w.subject for w in waiting]),
                                  by_lane=_counts([w.lane for w in waiting]), over_cap=False,
                                  claimed=_counts(claimed))
        return preview, waiting

    async def preview(self, scope: h.QueuedScope) -> h.QueuedPreview:
        preview, _ = await self.survey(scope)
        return preview

    async def _confirmed(self, req: h.QueuedMutation) -> list[Waiting]:
        preview, waiting = await self.survey(req)
        details = {"preview": preview.model_dump(mode="json")}
        if preview.over_cap:
            raise ZimmerError(ErrorCode.REFUSED, f"{preview.count} messages are in scope, over the cap of "
                              f"{h.MAINTENANCE_CAP} a call: narrow the scope (a lane and a subject) and call again",
                              {**details, "reason": "over_cap"})
        if req.expected_count != preview.count:
            raise ZimmerError(ErrorCode.REFUSED, f"expected {req.expected_count} waiting messages but {preview.count} "
                              "are waiting now; nothing was done. The preview is in details: confirm its count",
                              {**details, "reason": "count_mismatch", "count": preview.count})
        return waiting

    async def _purge(self, w: Waiting) -> bool:
        resp = await self.bus.js_api(f"STREAM.PURGE.{JOBS}", {"filter": w.subject, "seq": w.seq + 1})
        return "error" not in resp and int(resp.get("purged", 0)) == 1

    async def discard(self, req: h.QueuedMutation) -> h.QueuedReceipt:
        waiting = await self._confirmed(req)
        delivered = await self._delivered()  # re-read just before writing: a claim since the survey is skipped
        done: list[Waiting] = []
        skipped: list[str] = []
        for w in waiting:
            if not self._claimed(w.subject, w.seq, delivered) and await self._purge(w):
                done.append(w)
            else:
                skipped.append(w.subject)
        receipt = _receipt("discard", done, skipped)
        await self._page(req, receipt)
        return receipt

    async def reschedule(self, req: h.QueuedMutation) -> h.QueuedReceipt:
        if req.delay_minutes is None:
            raise ZimmerError(ErrorCode.INVALID, "delay_minutes is required to reschedule", {"field": "delay_minutes"})
        waiting = await self._confirmed(req)
        # Whole seconds: the @at schedule takes an RFC 3339 time; rounded up so it is never early.
        deliver_at = (self.clock.now() + timedelta(minutes=req.delay_minutes, seconds=1)).replace(microsecond=0)
        at = deliver_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        delivered = await self._delivered()
        done: list[Waiting] = []
        skipped: list[str] = []
        for w in waiting:
            msg = await self._message(w.subject)
            if msg is None or int(msg["seq"]) != w.seq or self._claimed(w.subject, w.seq, delivered):
                skipped.append(w.subject)
                continue
            deferred = f"{DEFERRED_PREFIX}.{w.subject.removeprefix(JOBS_PREFIX)}"
            body = base64.b64decode(msg.get("data") or "")
            await self.bus.publish(deferred, body, headers={"Nats-Schedule": f"@at {at}",
                                                            "Nats-Schedule-Target": w.subject})
            if await self._purge(w):
                done.append(w)
            else:  # claimed or replaced between the read and the purge: withdraw the copy
                await self.bus.js_api(f"STREAM.PURGE.{JOBS}", {"filter": deferred})
                skipped.append(w.subject)
        receipt = _receipt("reschedule", done, skipped, deliver_at)
        await self._page(req, receipt)
        return receipt

    async def _page(self, req: h.QueuedMutation, receipt: h.QueuedReceipt) -> None:
        """Every mutation is legible to somebody who was not reading the transcript it happened in."""
        verb = "discarded" if receipt.action == "discard" else "rescheduled"
        subjects = ", ".join(f"{c.name} ×{c.count}" for c in receipt.by_subject) or "none"
        lanes = ", ".join(f"{c.name} {c.count}" for c in receipt.by_lane) or "none"
        when = f" to {receipt.deliver_at.isoformat()}" if receipt.deliver_at else ""
        message = (f"{req.actor} {verb} {receipt.count} queued job message(s){when} (scope lane={req.lane}, "
                   f"subject={req.subject}); by lane: {lanes}; subjects: {subjects}"
                   + (f"; skipped (claimed or gone): {len(receipt.skipped)}" if receipt.skipped else "")
                   + ("" if receipt.recoverable else ". Not recoverable."))
        # An ERROR page (seed 003: "A mutating call also emits an ERROR log record and a GlitchTip
        # event"): a bulk write against the queue must be legible to someone not reading the transcript.
        stamp = datetime.now(UTC).isoformat()  # each call is its own issue: an issue notifies once, ever
        await page_or_log(self.page, f"Queued jobs {verb}", message,
                          ["queued_jobs", receipt.action, stamp], actor=req.actor, count=receipt.count,
                          lane=req.lane, subject=req.subject, subjects=[c.name for c in receipt.by_subject][:100])
