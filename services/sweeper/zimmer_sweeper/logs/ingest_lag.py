"""How far behind the log ingest is, and the page when it falls too far (`zimmer_sweeper.logs.ingest`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from zimmer_common.bus_link import BusLink
from zimmer_common.contracts.logs import INGEST_LOGS
from zimmer_common.contracts.subjects import Stream
from zimmer_common.pager import Pager
from zimmer_sweeper.logs.ingest import DURABLE

STREAM_MAX_AGE = timedelta(days=3)  # zimmer_common.streams: ZIMMER_INGEST max_age
PAGE_LAG = timedelta(hours=48)  # two thirds of the stream's age limit: a day to act before a line is lost


class IngestLag:
    """How far behind the ingest is: the age of the oldest line in the stream not yet written,
    read by sequence (the consumer's ack floor, then one message get), never by a scan. Pages
    once it passes PAGE_LAG, and resolves the page when it comes back under."""

    def __init__(self, bus: BusLink, now: Callable[[], datetime], pager: Pager):
        self._bus = bus
        self.now = now
        self.pager = pager
        self.paged = False

    async def oldest_unwritten_age(self) -> timedelta | None:
        bus = self._bus.bus
        info = await bus.js.consumer_info(Stream.INGEST.value, DURABLE)
        if not (info.num_pending or info.num_ack_pending):
            return timedelta(0)
        floor = info.ack_floor.stream_seq if info.ack_floor else 0
        reply = await bus.js_api(f"STREAM.MSG.GET.{Stream.INGEST.value}",
                                 {"seq": floor + 1, "next_by_subj": INGEST_LOGS})
        stored = reply.get("message", {}).get("time")
        if not stored:
            return timedelta(0)
        return max(timedelta(0), self.now() - _parse_nats_time(stored))

    async def check(self) -> timedelta | None:
        age = await self.oldest_unwritten_age()
        if age is None:
            return None
        late = age > PAGE_LAG
        if late or self.paged:
            hours = age.total_seconds() / 3600
            await self.pager.report(
                title="Log ingest falling behind", fingerprint=["sweeper", "log_ingest_lag"],
                condition_key="sweeper:log_ingest_lag", still_true=late,
                message=(f"The oldest log line not yet written is {hours:.1f} h old; the ingest stream drops lines "
                         f"at {STREAM_MAX_AGE.days * 24} h. Is the sweeper running and PostgreSQL writable?"
                         if late else f"Log ingest caught up: the oldest unwritten line is {hours:.1f} h old"),
                context={"age_seconds": round(age.total_seconds())})
            self.paged = late
        return age


def _parse_nats_time(value: str) -> datetime:
    """JetStream's RFC 3339 time with nanoseconds (Python reads at most microseconds)."""
    head, _, frac = value.rstrip("Z").partition(".")
    micros = (frac + "000000")[:6] if frac else "000000"
    return datetime.fromisoformat(f"{head}.{micros}").replace(tzinfo=UTC)
