"""The alerts ledger's list pages by bytes as well as by count (issue 27 #13), end to end (httpx
and the MCP SDK → gateway → NATS → alerts; nothing mocked). An issue carries its last message (up
to 2,000 characters) and snippet (up to 1,200): 600 such issues at `limit=500` are ~1.9 MB, past
one bus message. The list answers with the issues that fit and `next_before`; following it reads
every issue exactly once, in order, while new pages keep arriving. Before, it was a 413 ("more
than the bus carries")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from mcp_client import call, mcp_session
from sqlalchemy import func, select

from zimmer_alerts.store.tables import issues
from zimmer_common.contracts.alerts import PAGE, Page
from zimmer_common.contracts.envelope import EventEnvelope

ALERTS = "/api/v1/alerts"
SOURCE = "byte-pages"  # only this test's issues
ISSUES = 600
START = datetime.now(UTC) - timedelta(hours=1)


def large_page(n: int, at: datetime) -> Page:
    return Page(title=f"Large page {n}", level="warning", source=SOURCE, fingerprint=["bytes", f"n{n}"],
                message=f"{n:04d} " + "m" * 1995, snippet="s" * 1200, occurred_at=at)


async def record(services: dict[str, Any], pages: list[Page]) -> None:
    """Pages straight onto the page subject, as every sender's outbox relay puts them."""
    envelopes = [EventEnvelope(id=f"bytes-{p.title}-{p.occurred_at.isoformat()}", type="page",
                               version=Page.VERSION, source=SOURCE, occurred_at=p.occurred_at,
                               data=p.model_dump(mode="json")) for p in pages]
    await services["backlog"].bus.publish_many([(PAGE, e.model_dump_json().encode(), e.id) for e in envelopes])


async def recorded(services: dict[str, Any], n: int) -> None:
    """Until the ledger holds `n` of this test's issues (read in its database: the list is what is tested)."""
    for _ in range(600):
        async with services["alerts"].engine.connect() as conn:
            if (await conn.execute(select(func.count()).select_from(issues)
                                   .where(issues.c.source == SOURCE))).scalar_one() == n:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the ledger never held {n} issues")


async def every_issue(fetch: Callable[[str | None], Awaitable[dict[str, Any]]],
                      between: Callable[[int], Awaitable[None]] | None = None) -> tuple[list[str], list[int]]:
    """Every issue's title, following `next_before` until it is null (calling `between` after each
    page); and each page's size."""
    titles: list[str] = []
    sizes: list[int] = []
    before: str | None = None
    while True:
        page = await fetch(before)
        titles += [i["title"] for i in page["issues"]]
        sizes.append(len(page["issues"]))
        before = page["next_before"]
        if before is None:
            return titles, sizes
        assert len(sizes) <= ISSUES, "next_before never ended"
        if between is not None:
            await between(len(sizes))


async def test_a_ledger_too_large_for_one_message_pages_by_bytes(http: httpx.AsyncClient, stack) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    await record(services, [large_page(n, START + timedelta(seconds=n)) for n in range(1, ISSUES + 1)])
    await recorded(services, ISSUES)
    newest_first = [f"Large page {n}" for n in range(ISSUES, 0, -1)]

    first = await http.get(ALERTS, params={"limit": 500})
    assert first.status_code == 200, first.text[:300]  # was 413: "more than the bus carries"
    body = first.json()
    assert 1 <= len(body["issues"]) < 500 and body["next_before"], len(body["issues"])
    assert body["issues"][0]["title"] == newest_first[0] and len(body["issues"][0]["last_message"]) == 2000

    async def rest(before: str | None) -> dict[str, Any]:
        r = await http.get(ALERTS, params={"limit": 500, "source": SOURCE, **({"before": before} if before else {})})
        assert r.status_code == 200, r.text[:300]
        return r.json()

    async def more_pages_arrive(pages_read: int) -> None:
        """Between reads: a new issue (newer than the cursor), a repeat of the newest issue (read
        already: it moves further ahead) and a new issue last seen before every other (still ahead
        of the cursor: read once, last)."""
        now = datetime.now(UTC)
        await record(services, [large_page(ISSUES + pages_read, now), large_page(ISSUES, now),
                                large_page(2000 + pages_read, START - timedelta(minutes=pages_read))])
        await recorded(services, ISSUES + 2 * pages_read)

    titles, sizes = await every_issue(rest, more_pages_arrive)
    arrived_late = [f"Large page {2000 + n}" for n in range(1, len(sizes))]
    assert len(sizes) > 1 and len(titles) == len(set(titles))  # no issue on two pages
    assert titles == newest_first + arrived_late  # every issue exactly once, in order

    small = (await http.get(ALERTS, params={"limit": 2, "source": SOURCE})).json()  # a count under what fits
    assert len(small["issues"]) == 2 and small["next_before"] is not None
    refused = await http.get(ALERTS, params={"before": "not-a-cursor"})
    assert refused.status_code == 422 and "before" in refused.text

    async with mcp_session(url, groups="health") as session:
        async def mcp(before: str | None) -> dict[str, Any]:
            return await call(session, "get_alerts", {"limit": 500, "source": SOURCE,
                                                       **({"before": before} if before else {})})

        titles, sizes = await every_issue(mcp)
    assert len(sizes) > 1 and len(titles) == len(set(titles)) == ISSUES + 2 * len(arrived_late)
