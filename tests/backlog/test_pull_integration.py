"""Pulls, start-now and the spawn saga with spot-gate running (seed 000; DESIGN §5)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from zimmer_backlog.handlers.start import CALLER, spawn_key
from zimmer_backlog.service import build as build_backlog
from zimmer_common import deadline
from zimmer_common.bus import Bus
from zimmer_common.contracts import backlog as c
from zimmer_common.contracts import spot as s
from zimmer_common.contracts.runtime import QuotaReadingIn, WindowReadingIn
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_spot_gate.service import build as build_spot


@pytest.fixture
async def both(settings_factory):  # type: ignore[no-untyped-def]  # a fixture: its value is untyped
    spot = build_spot(settings_factory())
    backlog = build_backlog(settings_factory())
    await spot.start()
    await backlog.start()
    bus = await Bus.connect([spot.settings.nats_url], service="probe", instance_id="p", rpc_timeout=10)
    try:
        yield backlog, spot, bus
    finally:
        await bus.close()
        await backlog.stop()
        await spot.stop()


async def append(bus: Bus, n: int, cost: str = "small") -> c.ItemView:
    return (await bus.request(c.APPEND, c.AppendItem(key=f"zimmer#{n}", estimated_cost=cost, title=f"Fix {n}",
                                                     issue_url=f"https://github.com/acme/zimmer/issues/{n}"))).item


async def counts_become(bus: Bus, **expected: int) -> c.Counts:
    counts = None
    for _ in range(200):
        counts = (await bus.request(c.GET_ITEMS, c.ItemQuery())).counts
        if all(getattr(counts, k) == v for k, v in expected.items()):
            return counts
        await asyncio.sleep(0.05)
    raise AssertionError(f"counts stayed {counts}, wanted {expected}")


async def test_pull_starts_the_top_items_as_spot_children_of_the_puller(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, _spot, bus = both
    groomer = (await bus.request(s.SPAWN, s.SpawnSession(genesis="schedule", precedence=5, start=False))).session
    for n in (1, 2, 3):
        await append(bus, n)
    result = await bus.request(c.PULL, c.PullItems(count=2, acting_session_id=groomer.id))
    assert [x.item.key for x in result.started] == ["zimmer#1", "zimmer#2"] and not result.failed
    assert [x.precedence for x in result.started] == [7, 6]  # the puller's 5 + (count − n + 1)
    first = await bus.request(s.GET_SESSION, s.SessionRef(session_id=result.started[0].session_id))
    assert (first.parent_session_id, first.priority_class, first.goal) == (groomer.id, "spot", "open-reviewed-green-pr")
    assert first.prompt == "https://github.com/acme/zimmer/issues/1\n\nPlease implement this"
    assert first.title == "Implement zimmer#1 (Fix 1)"
    assert first.metadata["spawned_by"] == "work-backlog" and first.metadata["work_backlog_key"] == "zimmer#1"
    item = result.started[0].item
    assert (item.status, item.started_session_id, item.started_by_session_id) == ("started", first.id, groomer.id)
    await counts_become(bus, queued=1, in_flight=2)
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery(status="in_flight"))
    assert sorted(i.key for i in listed.items) == ["zimmer#1", "zimmer#2"]
    assert result.sentence.startswith("pulled 2")


async def test_pull_bounds_and_the_removal_vocabulary(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, _spot, bus = both
    await append(bus, 10)
    await append(bus, 11)
    reply = await bus.nc.request(c.PULL.subject, b'{"count": 11}', timeout=5)
    assert b'"invalid"' in reply.data
    reply = await bus.nc.request(c.PULL.subject, b'{"count": 1, "removals": [{"key": "zimmer#10", "reason": "meh"}]}',
                                 timeout=5)
    assert b'"invalid"' in reply.data  # free text is refused
    result = await bus.request(c.PULL, c.PullItems(count=1, removals=[c.Removal(key="zimmer#10", reason="issue_closed")]))
    assert [r.key for r in result.removed] == ["zimmer#10"] and result.removed[0].removal_reason == "issue_closed"
    assert [x.item.key for x in result.started] == ["zimmer#11"]
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.PULL, c.PullItems(count=1, keys=["zimmer#11"]))
    assert info.value.code is ErrorCode.INVALID


async def test_pull_by_keys_is_safe_to_retry_after_a_lost_answer(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, spot, bus = both
    for n in (20, 21):
        await append(bus, n)
    starter = backlog.app.starter
    failures = {"left": 1}

    async def lose_the_answer(item_id: int) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise ZimmerError(ErrorCode.UNAVAILABLE, "spot-gate's answer was lost")

    starter.after_spawn = lose_the_answer
    first = await bus.request(c.PULL, c.PullItems(keys=["zimmer#20", "zimmer#21"]))
    assert len(first.started) == 1 and [f.key for f in first.failed] == ["zimmer#20"] and first.failed[0].retry_safe
    again = await bus.request(c.PULL, c.PullItems(keys=["zimmer#20", "zimmer#21"]))
    assert not again.failed and sorted(x.item.key for x in again.started) == ["zimmer#20", "zimmer#21"]
    assert {x.session_id for x in again.started} >= {x.session_id for x in first.started}  # the same sessions
    async with spot.engine.connect() as conn:
        n = (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions "
                                     "WHERE metadata->>'spawned_by' = 'work-backlog'"))).scalar_one()
    assert n == 2  # none doubled


async def _leave_starting(backlog, item_id: int, start_deadline: float) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    async with backlog.engine.begin() as conn:
        await conn.execute(text("UPDATE backlog.work_backlog_items SET status = 'starting', spawn_key = :k, "
                                "start_class = 'spot', start_deadline = :d WHERE id = :i"),
                           {"i": item_id, "k": spawn_key(item_id), "d": start_deadline})


async def _recover(backlog) -> list:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return await backlog.app.starter.recover()


async def test_recovery_marks_started_a_row_whose_spawn_happened(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The spawn committed but its answer never came back (the bus died): the key names the session."""
    backlog, _spot, bus = both
    item = await append(bus, 30)
    with deadline.as_caller(CALLER):  # as the backlog itself asked, before its answer was lost
        made = await bus.request(s.SPAWN, s.SpawnSession(idempotency_key=spawn_key(item.id), start=False))
    await _leave_starting(backlog, item.id, time.time() - 5)
    await _recover(backlog)
    rows = (await bus.request(c.GET_ITEMS, c.ItemQuery(status="started"))).items
    assert [(r.key, r.started_session_id) for r in rows] == [("zimmer#30", made.session.id)]


async def test_recovery_requeues_a_row_whose_spawn_never_happened_and_spawns_nothing(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A pull answered `unavailable` must not start work later: recovery asks, never spawns."""
    backlog, spot, bus = both
    item = await append(bus, 31)
    await _leave_starting(backlog, item.id, time.time() - 5)
    assert await _recover(backlog) == ["requeued"]
    assert [r.key for r in (await bus.request(c.GET_ITEMS, c.ItemQuery())).items] == ["zimmer#31"]
    async with spot.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))).scalar_one() == 0


async def test_recovery_leaves_a_start_whose_deadline_has_not_passed(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, _spot, bus = both
    item = await append(bus, 32)
    await _leave_starting(backlog, item.id, time.time() + 60)  # its request may still commit
    assert await _recover(backlog) == []
    async with backlog.engine.connect() as conn:
        status = (await conn.execute(text("SELECT status FROM backlog.work_backlog_items WHERE id = :i"),
                                     {"i": item.id})).scalar_one()
    assert status == "starting"


async def test_recovery_runs_as_a_scheduled_job(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    backlog, _spot, bus = both
    item = await append(bus, 33)
    with deadline.as_caller(CALLER):  # as the backlog itself asked, before its answer was lost
        made = await bus.request(s.SPAWN, s.SpawnSession(idempotency_key=spawn_key(item.id), start=False))
    await _leave_starting(backlog, item.id, time.time() - 5)
    await backlog.runner.enqueue("recover_starting")
    rows: list = []
    for _ in range(200):
        rows = (await bus.request(c.GET_ITEMS, c.ItemQuery(status="started"))).items
        if rows:
            break
        await asyncio.sleep(0.05)
    assert [(r.key, r.started_session_id) for r in rows] == [("zimmer#33", made.session.id)]


async def test_a_pull_by_count_with_a_key_is_answered_once(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, spot, bus = both
    for n in (34, 35, 36):
        await append(bus, n)
    first = await bus.request(c.PULL, c.PullItems(count=2, idempotency_key="pull-1"))
    again = await bus.request(c.PULL, c.PullItems(count=2, idempotency_key="pull-1"))
    assert again == first and [x.item.key for x in first.started] == ["zimmer#34", "zimmer#35"]
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.PULL, c.PullItems(count=1, idempotency_key="pull-1"))
    assert info.value.code is ErrorCode.CONFLICT and info.value.details["field"] == "idempotency_key"
    async with spot.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))).scalar_one() == 2


async def test_a_keyed_pull_that_did_not_answer_is_finished_by_its_retry(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The first attempt chose its items and died (its answer lost, its deadline passed): a retry
    with the same key starts those items, not the next ones."""
    backlog, spot, bus = both
    for n in (37, 38, 39):
        await append(bus, n)
    starter = backlog.app.starter
    starter.after_spawn = _fail_once()
    first = await bus.request(c.PULL, c.PullItems(count=1, idempotency_key="pull-2"))
    assert [f.key for f in first.failed] == ["zimmer#37"]  # answered: the failure is the first answer
    assert await bus.request(c.PULL, c.PullItems(count=1, idempotency_key="pull-2")) == first
    async with backlog.engine.begin() as conn:  # now a first attempt that never answered, past its deadline
        await conn.execute(text("UPDATE backlog.idempotency_keys SET response = NULL, "
                                "progress = jsonb_set(progress, '{deadline}', to_jsonb(CAST(:d AS float)))"),
                           {"d": time.time() - 5})
    resumed = await bus.request(c.PULL, c.PullItems(count=1, idempotency_key="pull-2"))
    assert [x.item.key for x in resumed.started] == ["zimmer#37"] and not resumed.failed
    async with spot.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))).scalar_one() == 1


def _fail_once():  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    left = {"n": 1}

    async def fail(_item_id: int) -> None:
        if left["n"]:
            left["n"] -= 1
            raise ZimmerError(ErrorCode.UNAVAILABLE, "spot-gate's answer was lost")
    return fail


async def test_start_now_is_priority_and_operator_writes(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, _spot, bus = both
    a, b, low = await append(bus, 40), await append(bus, 41), await append(bus, 42, "large")
    now = await bus.request(c.START_NOW, c.ItemRef(item_id=b.id, by="tadas"))
    session = await bus.request(s.GET_SESSION, s.SessionRef(session_id=now.session_id))
    assert session.priority_class == "priority" and now.item.status == "started"
    with pytest.raises(ZimmerError) as info:
        await bus.request(c.START_NOW, c.ItemRef(item_id=b.id))
    assert info.value.code is ErrorCode.CONFLICT

    pinned = await bus.request(c.PIN, c.PinItem(item_id=low.id, precedence=9000))
    assert (pinned.pinned, pinned.precedence) == (True, 9000)
    assert (await append(bus, 43)).precedence == 5990  # a pinned item is nobody's peer
    unpinned = await bus.request(c.UNPIN, c.ItemRef(item_id=low.id))
    assert not unpinned.pinned and 500 <= unpinned.precedence <= 1999  # drifted out of its band: moved back
    removed = await bus.request(c.REMOVE, c.RemoveItem(item_id=a.id, reason="duplicate of #12", by="tadas"))
    assert (removed.status, removed.removal_reason, removed.removed_by) == ("removed", "duplicate of #12", "tadas")


async def test_a_pull_of_zero_says_which_zero_it_is(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    _backlog, spot, bus = both
    empty = await bus.request(c.PULL, c.PullItems(count=3))
    assert empty.sentence == "pulled 0 — the queue is empty; 0 in flight"
    await spot.app.record_reading(QuotaReadingIn(account="a", status="active", five_hour=WindowReadingIn(utilization=0.97),
                                                 seven_day=WindowReadingIn(utilization=0.5)))
    for n in (50, 51):
        await append(bus, n)
    pulled = await bus.request(c.PULL, c.PullItems(count=2))
    assert len(pulled.started) == 2
    await counts_become(bus, in_flight=2, spot_held=2)
    zero = await bus.request(c.PULL, c.PullItems(keys=["zimmer#50"]))  # already started: the same session back
    assert len(zero.started) == 1
    none = await bus.request(c.PULL, c.PullItems(keys=["zimmer#404"]))
    assert none.sentence == ("pulled 0 — none of the named keys is queued; 2 in flight, but 2 of those are held at "
                             "the spot gate on spot_budget, so the fleet is idle behind quota rather than busy")


async def test_the_newest_word_on_a_session_is_its_highest_version(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 8 #9: events may arrive out of order, and timestamps written by two clocks cannot
    order them; the session's version (bumped in the UPDATE that changes it) does."""
    from zimmer_backlog.store import queue as store

    backlog, _spot, bus = both
    item = await append(bus, 60)
    same = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a frozen clock: every event stamped alike
    async with backlog.engine.begin() as conn:
        await store.record_session(conn, 9001, item.id, "running", False, same, version=3)
        await store.record_session(conn, 9001, item.id, "waiting", True, same, version=2)  # older, arrived late
        await store.record_session(conn, 9001, item.id, "needs_input", False, same - timedelta(hours=1), version=4)
        row = (await conn.execute(text("SELECT status, version FROM backlog.produced_sessions "
                                       "WHERE session_id = 9001"))).one()
    assert (row.status, row.version) == ("needs_input", 4)


async def test_a_row_without_an_issue_from_the_fleet_is_never_spawned(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #1: a session's prompt comes from the issue unless the row is issueless *and* came
    from an operator or the import. A row that reached the table any other way (written before
    the contract held the rule) is refused at the pull, never spawned from its payload."""
    backlog, spot, bus = both
    async with backlog.engine.begin() as conn:
        await conn.execute(text("INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, "
                                "precedence, payload) VALUES ('zimmer#77', NULL, 'small', 'operator', 6000, "
                                """'{"prompt": "by hand"}')"""))
        await conn.execute(text("ALTER TABLE backlog.work_backlog_items "
                                "DROP CONSTRAINT issueless_only_from_a_human_or_the_import"))
        await conn.execute(text("INSERT INTO backlog.work_backlog_items (key, issue_url, estimated_cost, added_via, "
                                "precedence, payload) VALUES ('zimmer#78', NULL, 'small', 'rest', 5990, "
                                """'{"prompt": "UNGATED"}')"""))
    result = await bus.request(c.PULL, c.PullItems(count=2))
    assert [s.item.key for s in result.started] == ["zimmer#77"]
    assert [(f.key, f.code) for f in result.failed] == [("zimmer#78", "refused")]
    async with spot.engine.connect() as conn:
        prompts = [r.prompt for r in await conn.execute(text("SELECT prompt FROM spot_gate.sessions"))]
    assert prompts == ["by hand"]
    async with backlog.engine.connect() as conn:
        status = (await conn.execute(text("SELECT status FROM backlog.work_backlog_items WHERE key = 'zimmer#78'"))
                  ).scalar_one()
    assert status == "queued"  # a definite no: back on the queue, reported on every pull that meets it


async def test_no_other_caller_can_claim_the_backlogs_spawn_key(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #3: pre-creating a session with the key the backlog will use for item N (the fleet
    over REST can send any key) must not bind that session to the item on the next pull."""
    backlog, spot, bus = both
    item = await append(bus, 90)
    with deadline.as_caller("fleet"):
        squatter = await bus.request(s.SPAWN, s.SpawnSession(idempotency_key=spawn_key(item.id), start=False,
                                                             title="not the backlog's"))
    pulled = await bus.request(c.PULL, c.PullItems(keys=["zimmer#90"]))
    [started] = pulled.started
    assert started.session_id != squatter.session.id
    session = await bus.request(s.GET_SESSION, s.SessionRef(session_id=started.session_id))
    assert session.metadata["spawned_by"] == "work-backlog" and session.metadata["work_backlog_item_id"] == item.id


async def test_an_agents_pull_does_not_remove_a_pinned_item_and_reports_what_it_did_not_remove(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #8: pinned items are the operator's; a removal of a key that is not queued is
    reported, not ignored; removed_by always names who."""
    _backlog, _spot, bus = both
    pinned, _plain = await append(bus, 33), await append(bus, 34)
    await bus.request(c.PIN, c.PinItem(item_id=pinned.id, precedence=7000))
    with deadline.as_caller("fleet"):
        result = await bus.request(c.PULL, c.PullItems(count=0, removals=[
            c.Removal(key="zimmer#33", reason="trust_failed"), c.Removal(key="zimmer#34", reason="issue_closed"),
            c.Removal(key="zimmer#404", reason="issue_closed")]))
    assert [r.key for r in result.removed] == ["zimmer#34"] and result.removed[0].removed_by == "fleet"
    assert {n.key: n.why.split(":")[0].split(" (")[0] for n in result.not_removed} == {
        "zimmer#33": "pinned", "zimmer#404": "not queued"}
    still = (await bus.request(c.GET_ITEMS, c.ItemQuery())).items
    assert [(i.key, i.pinned) for i in still] == [("zimmer#33", True)]
    assert "removed 1 (1 issue_closed), refused to remove 2" in result.sentence


async def test_a_retried_pull_by_keys_reports_the_real_precedence_and_pulls_nothing_new(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #9: a keys-retry reported a recomputed precedence (101) and said "pulled 1"."""
    _backlog, _spot, bus = both
    groomer = (await bus.request(s.SPAWN, s.SpawnSession(genesis="schedule", precedence=100, start=False))).session
    await append(bus, 35)
    first = await bus.request(c.PULL, c.PullItems(keys=["zimmer#35"]))
    [started] = first.started
    await bus.request(s.UPDATE_SESSION, s.UpdateSession(session_id=started.session_id, precedence=1))
    again = await bus.request(c.PULL, c.PullItems(keys=["zimmer#35"], acting_session_id=groomer.id))
    [same] = again.started
    assert (same.session_id, same.precedence, same.earlier) == (started.session_id, 1, True)
    assert again.sentence.startswith("pulled 0 — 1 named was started by an earlier pull")


async def test_a_pull_of_zero_against_a_full_ceiling_is_a_pull(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #4: count 0 is the groomer's pull when the ceiling is full; it is answered, not refused."""
    _backlog, _spot, bus = both
    await append(bus, 36)
    await bus.request(c.PULL, c.PullItems(count=1))
    zero = await bus.request(c.PULL, c.PullItems(count=0, wip_ceiling=1))
    assert zero.started == [] and zero.sentence.startswith("pulled 0 — 1 in flight against a ceiling of 1")


async def test_a_slow_spot_gate_leaves_a_pull_honest(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Issue 9 #5: spot-gate stalls past the pull's deadline. The pull still answers, inside its
    deadline, saying what it did not start (`retry_safe`), and the stalled spawn never takes
    effect later: no session appears, and the recovery job puts the row back on the queue."""
    backlog, spot, bus = both
    await append(bus, 70)
    original = spot.app.admissions.spawn

    async def stalled(*args, **kwargs):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
        await asyncio.sleep(4)  # past the pull's budget for it, then decide and try to commit
        return await original(*args, **kwargs)

    spot.app.admissions.spawn = stalled
    try:
        pulled = await bus.request(c.PULL, c.PullItems(count=1), timeout=3)
    finally:
        spot.app.admissions.spawn = original
    assert pulled.started == [] and [(f.key, f.code, f.retry_safe) for f in pulled.failed] == [
        ("zimmer#70", "unavailable", True)]
    await asyncio.sleep(3)  # the stalled spawn wakes up, past its deadline: it must not commit
    async with spot.engine.connect() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM spot_gate.sessions"))).scalar_one() == 0
    assert await backlog.app.starter.recover() == ["requeued"]
    assert [i.key for i in (await bus.request(c.GET_ITEMS, c.ItemQuery())).items] == ["zimmer#70"]


async def test_a_deleted_session_leaves_in_flight(both) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Seed 000 "in_flight": a row whose session has ended is not in flight. A session deleted
    (DELETE /api/v1/sessions/{id}) will never send another status event, so its deletion is its
    end; without it the row would count in flight forever."""
    from zimmer_common.contracts.clones import DELETE_SESSION

    _backlog, _spot, bus = both
    for n in (1, 2):
        await append(bus, n)
    result = await bus.request(c.PULL, c.PullItems(count=2))
    await counts_become(bus, in_flight=2)
    await bus.request(DELETE_SESSION, s.SessionRef(session_id=result.started[0].session_id))
    counts = await counts_become(bus, in_flight=1)
    assert counts.parked == 0 and counts.claimed == 1
    listed = await bus.request(c.GET_ITEMS, c.ItemQuery(status="in_flight"))
    assert [i.key for i in listed.items] == ["zimmer#2"]
