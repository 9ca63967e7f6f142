"""The Issues view's GitHub side (seed 000 "Reading the queue as a human"): every 10 minutes the
snapshot job lists the open issues of each gated repository, records their titles and states, and
the open-issue count per repository over time; `issues_view` joins that to the stranded and held
rows. A row whose issue the snapshot shows closed is left out of its section and count, and nothing
is written back (#173: closed at 21:57 and still listed as stranded an hour later).

An issue is recorded closed when a complete listing no longer has it; an issue the snapshot never
held, or a listing cut short, changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Text, and_, cast, delete, exists, func, literal, select, update
from sqlalchemy.dialects.postgresql import distinct_on, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_backlog.handlers.github import GithubClient, GithubUnavailable, RateLimited, issue_ref
from zimmer_backlog.store import queue
from zimmer_backlog.store.on_github import ISSUE_NUMBER, ISSUE_REPO
from zimmer_backlog.store.tables import github_issues, github_open_issue_counts, items
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, next_offset, row_bytes, take_within
from zimmer_common.clock import Clock
from zimmer_common.contracts import backlog as c
from zimmer_common.logs import kv
from zimmer_common.unit_of_work import UnitsOfWork

log = logging.getLogger("zimmer.backlog.snapshot")

MAX_REPOS = 20
BUDGET = timedelta(minutes=3)  # the job's own bound: repositories not reached wait for the next tick
TREND_KEPT = timedelta(days=90)
TREND_SHOWN = timedelta(days=30)
# One point per repository per bucket, the bucket's last: 120 points over the 30 days shown, not the
# 4,320 a 10-minute snapshot leaves (issue 27 #13: with a few repositories those alone passed what
# one bus message carries, and the page's table listed every one).
TREND_BUCKET = timedelta(hours=6)
TREND_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)
SECTION_LIMIT = 200

SHOWN_CLOSED = exists().where(github_issues.c.repo == ISSUE_REPO, github_issues.c.number == ISSUE_NUMBER,
                              github_issues.c.state == "closed")


@dataclass
class SnapshotReport:
    repos: list[str] = field(default_factory=list)
    listed: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    not_reached: list[str] = field(default_factory=list)


class GithubSnapshot:
    def __init__(self, units: UnitsOfWork, github: GithubClient, clock: Clock,
                 gated_repos: list[str], on_listed: Callable[[str, int], None] = lambda repo, n: None):
        self._units = units
        self._github = github
        self.clock = clock
        self.gated_repos = [r.strip().lower() for r in gated_repos if r.strip()]
        self.on_listed = on_listed

    async def repos(self) -> list[str]:
        """The configured gated repositories, else those the backlog's issue URLs name."""
        if self.gated_repos:
            return self.gated_repos[:MAX_REPOS]
        async with self._units.read() as conn:
            return list((await conn.execute(select(ISSUE_REPO).where(items.c.issue_url.is_not(None))
                                            .distinct().order_by(ISSUE_REPO).limit(MAX_REPOS))).scalars())

    async def view(self, limit: int = SECTION_LIMIT, budget: int = ANSWER_ROWS_MAX_BYTES, *,
                   stranded_offset: int = 0, awaiting_offset: int = 0) -> c.IssuesView:
        """The Issues view as of now (`issues_view`), in one read: one snapshot, so its sections and
        counts agree."""
        async with self._units.snapshot() as conn:
            return await issues_view(conn, self.clock.now(), limit, budget, stranded_offset=stranded_offset,
                                     awaiting_offset=awaiting_offset)

    async def run(self) -> SnapshotReport:
        report = SnapshotReport(repos=await self.repos())
        started = self.clock.monotonic()
        for n, repo in enumerate(report.repos):
            if self.clock.monotonic() - started > BUDGET.total_seconds():
                report.not_reached = report.repos[n:]
                break
            try:
                listing = await self._github.open_issues(repo)
            except RateLimited as exc:
                report.failed[repo] = str(exc)
                report.not_reached = report.repos[n + 1:]
                break
            except GithubUnavailable as exc:
                report.failed[repo] = str(exc)
                continue
            await self._record(repo, listing.issues, listing.complete)
            report.listed[repo] = len(listing.issues)
            self.on_listed(repo, len(listing.issues))
        (log.warning if report.failed or report.not_reached else log.info)(
            "github snapshot", extra=kv(listed=report.listed, failed=report.failed, not_reached=report.not_reached))
        return report

    async def _record(self, repo: str, issues: list[Any], complete: bool) -> None:
        now = self.clock.now()
        async with self._units.begin() as uow:
            if issues:
                rows = [{"repo": repo, "number": i.number, "title": i.title[:2000], "state": "open", "seen_at": now}
                        for i in issues]
                stmt = insert(github_issues).values(rows)
                await uow.conn.execute(stmt.on_conflict_do_update(
                    index_elements=[github_issues.c.repo, github_issues.c.number],
                    set_={"title": stmt.excluded.title, "state": "open", "seen_at": now}))
            if complete:  # open before, absent from a complete listing now: closed (or moved away)
                await uow.conn.execute(update(github_issues).where(
                    github_issues.c.repo == repo, github_issues.c.state == "open",
                    github_issues.c.number.not_in([i.number for i in issues])).values(state="closed", seen_at=now))
            await uow.conn.execute(insert(github_open_issue_counts).values(
                repo=repo, taken_at=now, open_issues=len(issues), complete=complete).on_conflict_do_nothing())
            await uow.conn.execute(delete(github_open_issue_counts).where(
                github_open_issue_counts.c.taken_at < now - TREND_KEPT))


async def snapshot_title(conn: AsyncConnection, issue_url: str) -> str | None:
    """The issue's title as the snapshot last read it, when it holds the issue."""
    ref = issue_ref(issue_url)
    if ref is None:
        return None
    title = (await conn.execute(select(github_issues.c.title).where(
        github_issues.c.repo == ref.repo, github_issues.c.number == ref.number))).scalar_one_or_none()
    return title or None


async def issues_view(conn: AsyncConnection, now: datetime, limit: int = SECTION_LIMIT,
                      budget: int = ANSWER_ROWS_MAX_BYTES, *, stranded_offset: int = 0,
                      awaiting_offset: int = 0) -> c.IssuesView:
    """Stranded and Awaiting your decision as the page shows them (the stored verdict, minus rows
    whose issue the snapshot shows closed), "In GitHub, not on the queue", and the trend. Its three
    lists share `budget` bytes, a third each (issue 27 #13): a section cut short says where its next
    page starts, and "not on the queue" keeps its total."""
    section_budget = budget // 3

    async def section(where: Any, offset: int) -> tuple[list[c.ItemView], int, int]:
        shown = and_(where, ~SHOWN_CLOSED)
        counted = (await conn.execute(select(func.count().filter(shown), func.count().filter(SHOWN_CLOSED))
                                      .select_from(queue.WITH_SESSION).where(where))).one()
        rows = await queue.views_within(conn, queue.SELECT_ITEMS.where(shown).order_by(
            queue.LEFT_QUEUE_AT, items.c.id).limit(limit).offset(offset), section_budget)
        return rows, int(counted[0]), int(counted[1])

    stranded, stranded_total, stranded_closed = await section(queue.stranded(now), stranded_offset)
    awaiting, awaiting_total, awaiting_closed = await section(queue.awaiting_decision(now), awaiting_offset)
    held = (await conn.execute(select(func.count()).select_from(items).where(
        queue.LEFT_QUEUE, queue.hold_in_force(now)))).scalar_one()
    url = literal("https://github.com/") + github_issues.c.repo + "/issues/" + cast(github_issues.c.number, Text)
    on_queue = exists().where(func.lower(items.c.issue_url) == url)
    missing = select(github_issues).where(github_issues.c.state == "open", ~on_queue)
    not_on_queue = take_within([c.GithubIssue(repo=r.repo, number=r.number, title=r.title,
                                              url=f"https://github.com/{r.repo}/issues/{r.number}")
                                for r in await conn.execute(missing.order_by(
                                    github_issues.c.repo, github_issues.c.number).limit(limit))],
                               section_budget, row_bytes)
    not_on_queue_total = (await conn.execute(select(func.count()).select_from(missing.subquery()))).scalar_one()
    counts_table = github_open_issue_counts.c
    bucket = func.date_bin(literal(TREND_BUCKET), counts_table.taken_at, literal(TREND_ORIGIN))
    points = await conn.execute(
        select(counts_table.repo, counts_table.taken_at, counts_table.open_issues)
        .where(counts_table.taken_at >= now - TREND_SHOWN)
        .ext(distinct_on(counts_table.repo, bucket))
        .order_by(counts_table.repo, bucket, counts_table.taken_at.desc()))
    # Queued rows whose issue the snapshot shows closed: each is flagged on its row, and a pull
    # should remove it as issue_closed.
    queued_closed = (await conn.execute(select(func.count()).select_from(items).where(
        queue.QUEUED, SHOWN_CLOSED))).scalar_one()
    trend: dict[str, list[c.TrendPoint]] = {}
    for p in points:
        trend.setdefault(p.repo, []).append(c.TrendPoint(at=p.taken_at, open_issues=p.open_issues))
    snapshot_at = (await conn.execute(select(func.max(github_open_issue_counts.c.taken_at)))).scalar_one()
    return c.IssuesView(
        stranded=stranded, stranded_total=stranded_total, stranded_closed_in_github=stranded_closed,
        awaiting=awaiting, awaiting_total=awaiting_total, awaiting_closed_in_github=awaiting_closed, held=int(held),
        stranded_next_offset=next_offset(stranded_offset, len(stranded), stranded_total),
        awaiting_next_offset=next_offset(awaiting_offset, len(awaiting), awaiting_total),
        not_on_queue=not_on_queue, not_on_queue_total=int(not_on_queue_total),
        queued_closed_in_github=int(queued_closed),
        trend=[c.TrendSeries(repo=repo, points=pts) for repo, pts in trend.items()], snapshot_at=snapshot_at)
