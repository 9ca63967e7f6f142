"""The one call every service makes to reach a human (seed 003's StructuredLogger#error): it logs
the record and sends the page durably, through the service's outbox (so the page survives a crash
of the sender and of the alerts service), or straight to JetStream for a service without a
database. The snippet is built and redacted here, before anything leaves the process.

Wired at start-up: `attach_pager(service)` in each service's `build` sets `service.pager`, which
the job runner calls when a job crashes ("a sweep that crashes still reaches a human").

Plumbing (DESIGN §2): sending a page is a contract and a durable publish, so it lives here, beneath
every service; what is done with a page once sent (the ledger, grouping into issues, the sinks, the
health monitors) is the alerts service's (`zimmer_alerts`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pydantic import ValidationError

from zimmer_common.contracts.alerts import ID_IN_TITLE, PAGE, SNIPPET_MAX, Level, Page
from zimmer_common.contracts.fields import LONG_TEXT_MAX, NAME_MAX, TITLE_MAX
from zimmer_common.outbox import emit
from zimmer_common.service import Service
from zimmer_common.snippet import build as build_snippet
from zimmer_common.snippet import scrub

log = logging.getLogger("zimmer.page")


class Pager:
    def __init__(self, service: Service):
        self.service = service

    async def report(self, *, title: str, fingerprint: list[str], message: str, level: Level = "error",
                     source: str | None = None, context: dict[str, Any] | None = None,
                     snippet_source: object = None, condition_key: str | None = None,
                     still_true: bool = True, log_level: Level | None = None) -> Page | None:
        """Log the record and page. Never raises: a page that cannot be sent is logged as such
        (the ERROR record above it is still there for the log sink). `log_level` lowers the log
        record below the page's level where the seed says so: the stranded alert pages at error but
        logs at WARN, so one report does not page twice (once as itself, once as an ERROR record)."""
        source = source or self.service.name
        snippet = build_snippet(snippet_source) if snippet_source is not None else None
        # ERROR without a page: none needed, this record *is* the page's log half (seed 003 "Alerts").
        (log.error if (log_level or level) == "error" else log.warning)(title, extra={"fields": {
            "source": source, "message": message, "fingerprint": fingerprint, "condition_key": condition_key,
            "still_true": still_true, "snippet": snippet, **(context or {})}})
        fields: dict[str, Any] = dict(title=title, level=level, source=source, fingerprint=fingerprint,
                                      message=message, context=context or {}, snippet=snippet,
                                      condition_key=condition_key, still_true=still_true,
                                      occurred_at=self.service.clock.now(), log_level=log_level)
        try:
            try:
                page = Page(**fields)
            except ValidationError as exc:
                # Never dropped for its shape: cut down to what the contract takes, and say so.
                page = Page(**fit(fields, exc))
            await self._send(page)
            return page
        except Exception as exc:  # noqa: BLE001 - reporting a failure must not become one
            log.warning("page not sent", extra={"fields": {"title": title, "error": repr(exc)}})
            return None

    async def _send(self, page: Page) -> None:
        """Through the outbox; when the service's own database cannot take it (the page may be about
        exactly that), straight to JetStream."""
        s = self.service
        if s.engine is not None and s.schema:
            try:
                async with s.engine.begin() as conn:
                    await emit(conn, s.schema, PAGE, "page", page)
            except Exception as exc:  # noqa: BLE001 - fall through to the bus
                if s.bus is None:
                    raise
                log.warning("page not written to the outbox; publishing it directly",
                            extra={"fields": {"title": page.title, "error": repr(exc)}})
            else:
                if s.relay is not None:
                    s.relay.kick()
                return
        assert s.bus is not None, "paging before the service started"
        await s.bus.publish_event(PAGE, "page", page, event_id=uuid.uuid4().hex)

    async def job_crashed(self, job: str, exc: BaseException) -> None:
        await self.report(title=f"Job failed: {job}", fingerprint=[self.service.name, job, type(exc).__name__],
                          message=f"{job} raised {type(exc).__name__}; its next tick is the retry",
                          context={"job": job, "exception": type(exc).__name__}, snippet_source=exc)


CUT = " … (cut)"


def _text(value: Any, limit: int) -> str:
    text = scrub(str(value))
    return text if len(text) <= limit else text[:limit - len(CUT)] + CUT


def fit(fields: dict[str, Any], refused: ValidationError) -> dict[str, Any]:
    """A page the contract refused, cut down to what it takes: text scrubbed (NUL, lone
    surrogates) and cut to its bound with a mark, ids in the title masked, the fingerprint's
    parts bounded, a context that cannot be stored replaced by why. A page is never lost to its
    own shape (issue 26 #7: a message past 2,000 characters lost the page)."""
    title = ID_IN_TITLE.sub("<id>", _text(fields["title"], TITLE_MAX)) or "Page"
    parts = [_text(p, NAME_MAX) for p in fields["fingerprint"] or [title]]
    context = fields["context"]
    if any(err["loc"][:1] == ("context",) for err in refused.errors()):
        context = {"context_dropped": f"not storable: {_text(refused.errors()[0]['msg'], NAME_MAX)}"}
    return {**fields, "title": title, "source": _text(fields["source"], NAME_MAX) or "unknown",
            "fingerprint": [*parts[:9], " ".join(parts[9:])][:10] if len(parts) > 10 else parts,
            "message": _text(fields["message"], LONG_TEXT_MAX), "context": context,
            "snippet": _text(fields["snippet"], SNIPPET_MAX) if fields["snippet"] is not None else None,
            "condition_key": _text(fields["condition_key"], NAME_MAX) if fields["condition_key"] else None}


def attach_pager(service: Service) -> Pager:
    service.pager = pager = Pager(service)
    return pager
