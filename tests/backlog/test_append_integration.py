"""Appending to the backlog and its counts, against real PostgreSQL and NATS (seed 000)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from zimmer_backlog.service import build
from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.spot import SESSION_STATUS_CHANGED, SessionEvent, SessionView
from zimmer_common.errors import ErrorCode, ZimmerError


@pytest.fixture
async def backlog(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    service = build(settings_factory())
    await service.start()
    bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)
    try:
        yield service, bus
    finally:
        await bus.close()
        await service.stop()


def item(key: str, cost: str = "small", **kw) -> c.AppendItem:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return c.AppendItem(key=key, issue_url=f"https://github.com/acme/zimmer/issues/{key.split('#')[-1]}",
                        estimated_cost=cost, title=f"Issue {key}", **kw)


async def test_appends_land_in_their_bands_first_in_first_out(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _service, bus = backlog
    a = await bus.request(c.APPEND, item("zimmer#1"))
    b = await bus.request(c.APPEND, item("zimmer#2"))
    m = await bus.request(c.APPEND, item("zimmer#3", "medium"))
    big = await bus.request(c.APPEND, item("zimmer#4", "large"))
    assert [x.item.precedence for x in (a, b, m, big)] == [6000, 5990, 3000, 1000]
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery())
    assert [i.key for i in listed.items] == ["zimmer#1", "zimmer#2", "zimmer#3", "zimmer#4"]
    assert listed.counts.queued == 4 and listed.total == 4


async def test_a_key_with_a_queued_row_is_a_conflict_naming_it(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _service, bus = backlog
    first = await bus.request(c.APPEND, item("zimmer#7"))
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.APPEND, item("zimmer#7", "large"))
    assert info.value.code is ErrorCode.CONFLICT and info.value.details["item_id"] == first.item.id


async def test_a_started_row_stays_as_history_beside_a_fresh_one(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, bus = backlog
    first = await bus.request(c.APPEND, item("zimmer#8"))
    async with service.engine.begin() as conn:
        await conn.execute(text("UPDATE backlog.work_backlog_items SET status = 'started', started_at = now() "
                                "WHERE id = :i"), {"i": first.item.id})
    again = await bus.request(c.APPEND, item("zimmer#8"))
    assert again.item.id != first.item.id and again.item.status == "queued"
    everything = await bus.request(c.GET_ITEMS, c.ItemQuery(status="all"))
    assert sorted(i.status for i in everything.items if i.key == "zimmer#8") == ["queued", "started"]


async def test_issueless_items_only_from_an_operator_or_the_import(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 000 "What an item is": an issueless item may only come from a human or the import.
    Issue 9 #1: `issue_url: ""` and `"not a url"` passed, and spawned from payload.prompt."""
    _service, bus = backlog

    async def refused(body: dict) -> list[tuple]:  # type: ignore[type-arg]  # JSON of any shape
        # Raw JSON, as any client of the bus could send it: the service holds the same contract.
        raw = await bus.nc.request(c.APPEND.subject, json.dumps(body).encode(), timeout=5)
        error = json.loads(raw.data)["error"]
        assert error["code"] == "invalid", error
        return [tuple(e["loc"]) for e in error["details"]["errors"]]

    ungated = {"key": "zimmer#40", "estimated_cost": "small", "payload": {"prompt": "UNGATED"}}
    assert await refused({**ungated, "key": "manual-tidy", "added_via": "rest"}) == [("issue_url",)]
    assert await refused({**ungated, "issue_url": ""}) == [("issue_url",)]
    assert await refused({**ungated, "issue_url": "not a url"}) == [("issue_url",)]
    assert await refused({**ungated, "issue_url": "http://github.com/acme/zimmer/issues/40"}) == [("issue_url",)]
    assert await refused({**ungated, "issue_url": "https://github.com/acme/other/issues/40"}) == [("key",)]
    assert await refused({**ungated, "issue_url": "https://github.com/acme/zimmer/issues/41"}) == [("key",)]
    # The rules are the backlog's (issue 30 #1), not the contract's: a well-shaped append built on
    # this side of the bus reaches the backlog, which refuses it naming the field.
    with pytest.raises(ZimmerError) as refusal:
        await bus.request(c.APPEND, c.AppendItem(key="manual-tidy", estimated_cost="small", added_via="mcp"))
    assert refusal.value.code is ErrorCode.INVALID and refusal.value.details["field"] == "issue_url"
    ok = await bus.request(c.APPEND, c.AppendItem(key="manual-tidy", estimated_cost="small", added_via="operator",
                                                  payload={"prompt": "Tidy the README"}))
    assert ok.item.issue_url is None and ok.item.payload["prompt"] == "Tidy the README"


async def test_a_coalesced_append_that_breaks_an_issue_rule_is_refused_alone(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The backlog decides the issue rules (issue 30 #1): within one append_items, the append that
    breaks one gets its own `invalid` naming the field, and the others land as if it were not there;
    a request of only such appends answers each, appending nothing."""
    _service, bus = backlog
    wrong_issue = c.AppendItem(key="Zimmer#61", issue_url="https://github.com/acme/zimmer/issues/62",
                               estimated_cost="small")
    mixed = await bus.request(c.APPEND_MANY, c.AppendMany(appends=[
        c.CallerAppend(item=item("zimmer#60"), caller="fleet"), c.CallerAppend(item=wrong_issue, caller="fleet"),
        c.CallerAppend(item=item("ACME/Zimmer#63"), caller="fleet")]))
    first, refused, third = mixed.outcomes
    assert first.result is not None and first.result.item.key == "zimmer#60"
    assert refused.result is None and refused.error is not None and refused.error.code == "invalid"
    assert refused.error.details["field"] == "key" and refused.error.details["errors"][0]["loc"] == ["key"]
    assert third.result is not None and third.result.item.key == "zimmer#63"  # its one spelling
    only = await bus.request(c.APPEND_MANY, c.AppendMany(appends=[c.CallerAppend(item=wrong_issue)]))
    assert [o.error.code for o in only.outcomes if o.error] == ["invalid"]
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery())
    assert [i.key for i in listed.items] == ["zimmer#60", "zimmer#63"]


async def test_sixteen_concurrent_appenders_lose_nothing_and_keep_fifo(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _service, bus = backlog
    results = await asyncio.gather(*(bus.request(c.APPEND, item(f"zimmer#{100 + n}")) for n in range(16)))
    precedences = [r.item.precedence for r in results]
    assert len(set(precedences)) == 16  # distinct: every append saw the one before it
    by_arrival = sorted(results, key=lambda r: r.item.added_at)
    assert [r.item.precedence for r in by_arrival] == sorted(precedences, reverse=True)  # FIFO within the band
    assert (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts.queued == 16


def session_event(session_id: int, item_id: int, status: str, *, held: bool = False, started: bool = True,
                  at: datetime | None = None) -> SessionEvent:
    now = at or datetime.now(UTC)
    view = SessionView(
        id=session_id, parent_session_id=None, forked_from_session_id=None, genesis="api", scheduling_class=None,
        priority_class="spot", precedence=0, status=status, runtime="claude_code", harness="claude_code",
        model="claude-opus-4", title="t", goal=None, prompt=None, trigger_id=None, clone_path=None,
        metadata={"spawned_by": "work-backlog", "work_backlog_item_id": item_id}, is_status_summary_fork=False,
        ever_started=started, spot_hold_reason="pacing_curve" if held else None, spot_hold_retry_at=None,
        spot_hold_count=1 if held else 0, held_turn_kind=None, queued_prompt_coming=held, enqueued_messages=0,
        created_at=now, updated_at=now)
    return SessionEvent(session=view, spawned_by="work-backlog")


async def test_counts_follow_the_sessions_the_backlog_produced(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service, bus = backlog
    items = [(await bus.request(c.APPEND, item(f"zimmer#{200 + n}"))).item.id for n in range(4)]
    t0 = datetime.now(UTC)
    events = [session_event(1, items[0], "running"), session_event(2, items[1], "waiting", held=True, started=False),
              session_event(3, items[2], "needs_input"), session_event(4, items[3], "archived")]
    for n, ev in enumerate(events):
        await bus.publish_event(SESSION_STATUS_CHANGED, "session_status_changed", ev, event_id=f"e{n}")
    # An older event for session 1 arriving late must not roll it back.
    from datetime import timedelta

    stale = session_event(1, items[0], "waiting", at=t0 - timedelta(minutes=5))
    await bus.publish_event(SESSION_STATUS_CHANGED, "session_status_changed", stale, event_id="e-stale")
    # A session someone else spawned is not the backlog's to count.
    foreign = session_event(9, items[0], "running")
    foreign.session.metadata = {"spawned_by": "someone-else"}
    await bus.publish_event(SESSION_STATUS_CHANGED, "session_status_changed", foreign, event_id="e-foreign")

    expected = c.Counts(queued=4, in_flight=2, spot_held=1, parked=1, claimed=3)
    for _ in range(200):
        counts = (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts
        if counts == expected:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    assert (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts == expected
    # The status filters list the rows behind each count.
    held = await bus.request(c.GET_ITEMS, c.ItemQuery(status="spot_held"))
    parked = await bus.request(c.GET_ITEMS, c.ItemQuery(status="parked"))
    assert held.total == 0 and parked.total == 0  # rows are reached through started_session_id, set on start


async def test_the_counts_read_the_claimed_sessions_not_the_history(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """An append batch counts under the ranking lock: a count that scanned every session the
    backlog ever produced (29 ms a batch at 100,000) would bound every append by the history."""
    from sqlalchemy.dialects import postgresql

    from zimmer_backlog.store import queue as store

    service, bus = backlog
    claimed = (await bus.request(c.APPEND, item("zimmer#300"))).item.id
    async with service.engine.begin() as conn:
        await conn.execute(text(
            "INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, precedence, status, "
            "started_session_id, started_at, added_via) SELECT 'old#' || g, 'https://github.com/acme/old/issues/' || g, "
            "'small', 0, 'started', 1000000 + g, now(), 'rest' FROM generate_series(1, 20000) g"))
        await conn.execute(text(
            "INSERT INTO backlog.produced_sessions (session_id, item_id, status) SELECT started_session_id, id, "
            "'archived' FROM backlog.work_backlog_items WHERE key LIKE 'old#%'"))
        await conn.execute(text("INSERT INTO backlog.produced_sessions (session_id, item_id, status) "
                                "VALUES (1, :i, 'running')"), {"i": claimed})
        await conn.execute(text("ANALYZE backlog.produced_sessions"))
        sql = str(store.COUNTS.params(now=datetime.now(UTC)).compile(
            dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
        plan = "\n".join(r[0] for r in await conn.execute(text("EXPLAIN " + sql.replace("%", "%%"))))
    assert "Seq Scan on produced_sessions" not in plan, plan
    counts = (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts
    assert (counts.in_flight, counts.claimed, counts.queued) == (1, 1, 1)


async def test_the_service_imports_work_backlog_json_once_at_start(settings_factory, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    import json

    source = tmp_path / "WORK_BACKLOG.json"
    source.write_text(json.dumps({"items": [
        {"id": "a1", "key": "zimmer#900", "issue_url": "https://github.com/acme/zimmer/issues/900",
         "estimated_cost": "small", "precedence": 6123, "title": "Imported"}]}))
    monkeypatch.setenv("WORK_BACKLOG_SOURCE_PATH", str(source))
    for _attempt in range(2):  # the second start finds the finished run and reads nothing
        service = build(settings_factory())
        await service.start()
        try:
            bus = await Bus.connect([service.settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)
            try:
                for _ in range(100):
                    items = (await bus.request(c.GET_ITEMS, c.ItemQuery())).items
                    if items:
                        break
                    await asyncio.sleep(0.05)
                assert [(i.key, i.precedence, i.added_via) for i in items] == [("zimmer#900", 6123, "import")]
            finally:
                await bus.close()
        finally:
            await service.stop()
    from zimmer_common.db import create_engine

    engine = create_engine(service.settings.database_url)
    try:
        async with engine.connect() as conn:
            runs = (await conn.execute(text("SELECT count(*) FROM backlog.import_runs"))).scalar_one()
    finally:
        await engine.dispose()
    assert runs == 1  # the second start read nothing


async def test_concurrent_appends_through_re_spaces_keep_the_band_and_fifo(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The large band re-spaces after 50 appends; batches of concurrent appends cross it."""
    _service, bus = backlog
    results = []
    for wave in range(5):  # 5 waves of 16 concurrent appends: 80 large items
        results += await asyncio.gather(*(bus.request(c.APPEND, item(f"zimmer#{1000 + wave * 16 + n}", "large"))
                                          for n in range(16)))
    listed = (await bus.request(c.GET_ITEMS, c.ItemQuery(limit=1000))).items
    assert len(listed) == 80
    precedences = [i.precedence for i in listed]
    assert len(set(precedences)) == 80 and all(500 <= p <= 1999 for p in precedences)
    by_age = sorted(listed, key=lambda i: (i.added_at, i.id))
    assert [i.precedence for i in by_age] == sorted(precedences, reverse=True)  # FIFO survived every re-space


async def test_an_unpin_into_a_full_band_is_refused_and_other_bands_still_re_rank(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #2: with the large band full, unpinning a large item pinned at 100 answers 409
    band_full and moves nothing (it stays pinned at 100); unpinning a medium item pinned at 50
    still puts it back into the medium band, above all large work."""
    service, bus = backlog
    async with service.engine.begin() as conn:
        await conn.execute(text("""
            INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, precedence)
            SELECT 'zimmer#' || g, 'https://github.com/acme/zimmer/issues/' || g, 'large', 'rest', 1001 - g
            FROM generate_series(1, 500) g"""))
        rows = await conn.execute(text("""
            INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, precedence, pinned)
            VALUES ('zimmer#901', 'https://github.com/acme/zimmer/issues/901', 'large', 'operator', 100, true),
                   ('zimmer#902', 'https://github.com/acme/zimmer/issues/902', 'medium', 'operator', 50, true)
            RETURNING id, key"""))
        ids = {r.key: r.id for r in rows}
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.UNPIN, c.ItemRef(item_id=ids["zimmer#901"]))
    assert info.value.code is ErrorCode.BAND_FULL
    large = (await bus.request(c.GET_ITEMS, c.ItemQuery(status="all", limit=1000))).items
    stuck = next(i for i in large if i.key == "zimmer#901")
    assert (stuck.pinned, stuck.precedence) == (True, 100)
    medium = await bus.request(c.UNPIN, c.ItemRef(item_id=ids["zimmer#902"]))
    assert not medium.pinned and 2000 <= medium.precedence <= 3999


async def appended_events(service) -> list[c.ItemView]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with service.engine.connect() as conn:
        rows = await conn.execute(text("SELECT payload FROM backlog.outbox WHERE event_type = 'item_appended' ORDER BY id"))
        return [c.ItemEvent.model_validate(r.payload["data"]).item for r in rows]


async def test_each_append_is_announced_once_as_it_was_answered_in_its_order(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 000 / DESIGN §5: every append commits with its item_appended event. A batch with no
    drifted item writes its events in the statement that inserts its rows: each event is the row
    as the append's answer shows it, one per appended row (none for a refused one), in queue order."""
    service, bus = backlog
    asks = [item(f"zimmer#{n}", ("small", "medium", "large")[n % 3]) for n in range(1, 17)] + [item("zimmer#5")]
    answers = await asyncio.gather(*(bus.request(c.APPEND, a) for a in asks), return_exceptions=True)
    appended = [a.item for a in answers if isinstance(a, c.AppendResult)]
    assert len(appended) == 16 and sum(isinstance(a, ZimmerError) for a in answers) == 1  # the repeat of #5
    events = await appended_events(service)
    assert sorted(events, key=lambda i: i.id) == sorted(appended, key=lambda i: i.id)
    assert [e.added_at for e in events] == sorted(e.added_at for e in events)  # outbox order is queue order


async def test_an_append_that_re_ranks_a_drifted_item_announces_its_row_as_answered(backlog) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """With a drifted item on the queue the batch re-ranks after its insert, so its events are
    written after the re-rank: still one per row, still as the answer shows it."""
    service, bus = backlog
    async with service.engine.begin() as conn:  # a small item far below the small band: drifted
        await conn.execute(text("""
            INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, precedence)
            VALUES ('zimmer#700', 'https://github.com/acme/zimmer/issues/700', 'small', 'rest', 10)"""))
    answers = await asyncio.gather(*(bus.request(c.APPEND, item(f"zimmer#{n}")) for n in range(1, 6)))
    events = await appended_events(service)
    assert sorted(events, key=lambda i: i.id) == sorted((a.item for a in answers), key=lambda i: i.id)
    listed = (await bus.request(c.GET_ITEMS, c.ItemQuery())).items
    drifted = next(i for i in listed if i.key == "zimmer#700")
    assert 4000 <= drifted.precedence <= 7000  # re-ranked into its band
