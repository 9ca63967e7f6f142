"""A backlog service on real PostgreSQL and NATS with a frozen clock, reading a fake GitHub server:
what the liveness, hold and stranded-alert tests share. Rows that left the queue long ago are
history, so they are written as history (SQL); everything after is done by the service itself."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_backlog.config import GithubSettings
from zimmer_backlog.jobs.liveness import PassReport
from zimmer_backlog.service import BacklogApp
from zimmer_backlog.service import build as build_backlog
from zimmer_common.bus import Bus
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.alerts import PAGE
from zimmer_common.service import Service
from zimmer_sim.fake_github import FakeGithub

TOKEN = "ghs_fake_liveness_token"
REPO = "acme/zimmer"


@dataclass
class World:
    service: Service
    bus: Bus
    gh: FakeGithub
    clock: FrozenClock
    next_session: int = 5000
    seen_pages: int = 0
    ids: dict[str, int] = field(default_factory=dict)

    @property
    def app(self) -> BacklogApp:
        return self.service.app  # type: ignore[return-value]  # the backlog service's app

    @property
    def engine(self) -> AsyncEngine:
        assert self.service.engine is not None
        return self.service.engine

    @property
    def now(self) -> datetime:
        return self.clock.now()

    async def sweep(self) -> PassReport:
        return await self.app.liveness.run()

    async def left_queue(self, n: int, *, ago: timedelta, repo: str = REPO, ended_ago: timedelta | None = None,
                         status: str = "started", reason: str | None = None, key: str | None = None,
                         session_status: str = "archived", row_repo: str | None = None) -> int:
        """A row that left the queue `ago` (started, or removed with `reason`); a started row's
        session ended `ended_ago` (default: when it left plus an hour, capped to 7 hours ago)."""
        key = key or f"{repo.split('/')[1]}#{n}"
        url = f"https://github.com/{repo}/issues/{n}"
        when = self.now - ago
        async with self.engine.begin() as conn:
            item_id = (await conn.execute(text(
                "INSERT INTO backlog.work_backlog_items (key, issue_url, repo, title, estimated_cost, added_via, "
                "precedence, status, started_at, started_session_id, removed_at, removal_reason, added_at) "
                "VALUES (:key, :url, :repo, :title, 'small', 'rest', 0, :status, :started, :sid, :removed, :reason, "
                ":added) RETURNING id"), {
                    "key": key, "url": url, "repo": row_repo or repo, "title": f"Issue {n}", "status": status,
                    "started": when if status == "started" else None,
                    "sid": self.next_session if status == "started" else None,
                    "removed": when if status == "removed" else None, "reason": reason,
                    "added": when - timedelta(hours=1)})).scalar_one()
            if status == "started":
                ended = self.now - (ended_ago if ended_ago is not None else max(ago - timedelta(hours=1),
                                                                                timedelta(hours=7)))
                await conn.execute(text(
                    "INSERT INTO backlog.produced_sessions (session_id, item_id, status, updated_at, version, ended_at) "
                    "VALUES (:sid, :item, :status, :at, 1, :ended)"),
                    {"sid": self.next_session, "item": item_id, "status": session_status, "at": ended,
                     "ended": ended if session_status in ("archived", "failed") else None})
                self.next_session += 1
        self.ids[key] = int(item_id)
        return int(item_id)

    async def row(self, item_id: int) -> Any:
        async with self.engine.connect() as conn:
            return (await conn.execute(text("SELECT * FROM backlog.work_backlog_items WHERE id = :id"),
                                       {"id": item_id})).one()

    async def pages(self) -> list[dict[str, Any]]:
        """Every page the service has sent, in order (read from its outbox: written means sent)."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(text("SELECT payload FROM backlog.outbox WHERE subject = :s ORDER BY id"),
                                       {"s": PAGE})).scalars().all()
        return [(r if isinstance(r, dict) else json.loads(r))["data"] for r in rows]

    async def new_pages(self) -> list[dict[str, Any]]:
        pages = await self.pages()
        fresh, self.seen_pages = pages[self.seen_pages:], len(pages)
        return fresh

    async def counts(self) -> c.Counts:
        return (await self.bus.request(c.GET_ITEMS, c.ItemQuery(limit=1))).counts

    async def hold(self, item_id: int, reason: str = "Pick one of #1, #2, #3: owed by ops, laid out in #9",
                   by: str = "operator") -> c.ItemView:
        return await self.bus.request(c.HOLD, c.HoldItem(item_id=item_id, reason=reason, by=by))


async def open_world(settings_factory: Any, gh: FakeGithub, **github: Any) -> World:
    clock = FrozenClock(datetime.now(UTC).replace(microsecond=0))
    # GitHub's bounds are production's unless a test is about them: CI's box, its two cores shared by
    # the services, the fake GitHub's thread and Chromium, once took over 1 s to answer 50 issues.
    settings = GithubSettings(**{"github_api_url": gh.url, "github_token": TOKEN, **github})
    service = build_backlog(settings_factory(), clock=clock, github=settings)
    await service.start()
    bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)
    return World(service, bus, gh, clock)


async def close_world(world: World) -> None:
    await world.bus.close()
    await world.service.stop()


@asynccontextmanager
async def github_world(settings_factory: Any, **github: Any) -> AsyncIterator[World]:
    """A fake GitHub and a backlog pointed at it (`github`: GithubSettings overrides), closed after."""
    with FakeGithub(TOKEN) as gh:
        world = await open_world(settings_factory, gh, **github)
        try:
            yield world
        finally:
            await close_world(world)


async def eventually(check: Any, what: str, tries: int = 200) -> Any:
    for _ in range(tries):
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} did not happen")


def world_in_stack(services: dict[str, Any], gh: FakeGithub) -> World:
    """A World over the stack fixture's backlog (its real clock: rows are written relative to now)."""
    return World(services["backlog"], services["gateway"].bus, gh, FrozenClock(datetime.now(UTC)))


class GithubForTheStack:
    """For a module's `stack_setup`: a fake GitHub the stack's backlog reads (through the
    environment its settings come from), started before the services and stopped after."""

    def __init__(self, monkeypatch: Any):
        self.gh = FakeGithub(TOKEN)
        monkeypatch.setenv("ZIMMER_GITHUB_API_URL", self.gh.url)
        monkeypatch.setenv("ZIMMER_GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("ZIMMER_GATED_REPOS", REPO)

    def __enter__(self) -> FakeGithub:
        return self.gh.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.gh.__exit__(*exc)


@pytest.fixture
def stack_setup(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    """A module imports this to have its `stack` read the fake GitHub (`GithubForTheStack`)."""
    with GithubForTheStack(monkeypatch) as gh:
        yield gh
