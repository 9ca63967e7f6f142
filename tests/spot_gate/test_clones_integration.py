"""The spot-gate side of issue 16 on real PostgreSQL and NATS: the runtime's clone reports, and the
questions the sweepers ask before they delete anything (who owns this path, which of these ids
exist, which clones are live), the unarchive stamp, and durable warnings."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from zimmer_common.contracts import clones as k
from zimmer_common.contracts import spot as c
from zimmer_common.contracts.runtime import SessionStatusReport
from zimmer_common.errors import ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.handlers.clones import Clones

CLONES = "/srv/zimmer/clones"


async def spawn(spot, **kw) -> c.SessionView:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.bus.request(c.SPAWN, c.SpawnSession(start=False, **{"genesis": "schedule", **kw}))).session


async def report(spot, session_id: int, path: str, **kw) -> object:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """A clone report applied as the ingest consumer applies it, in its own transaction."""
    async with spot.service.engine.begin() as conn:
        return await Clones(UnitsOfWork(spot.service, "spot_gate")).record_report(
            conn, k.CloneReport(session_id=session_id, clone_path=path, **kw), spot.clock.now())


async def cloned(spot, name: str, *, status: str = "waiting") -> int:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    """A session in `status` whose clone is <CLONES>/<name>."""
    s = await spawn(spot)
    await report(spot, s.id, f"{CLONES}/{name}")
    if status == "archived":
        await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=s.id))
    elif status != "waiting":
        await spot.app.report_status(SessionStatusReport(session_id=s.id, status=status))
    return s.id


async def owners(spot, *paths: str) -> list[k.CloneOwnership]:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    return (await spot.bus.request(k.CLONE_OWNERSHIP, k.CloneOwnershipQuery(paths=list(paths)))).answers


async def eventually(check, within: float = 15.0) -> None:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "not applied in time"
        await asyncio.sleep(0.05)


# ---- clone reports --------------------------------------------------------------------------

async def test_a_clone_report_over_ingest_is_stored_once_and_an_unknown_one_is_acked(  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
        spot, caplog) -> None:
    s = await spawn(spot)
    clone = k.CloneReport(session_id=s.id, clone_path=f"{CLONES}/zimmer-main-1785661439-005ceef3",
                          agent_subdirectory="services/web", scaffolded=True, host="runtime-1")
    await spot.bus.publish_event(k.INGEST_CLONE, "clone", clone, event_id="clone-1")
    await spot.bus.publish_event(k.INGEST_CLONE, "clone", clone, event_id="clone-1-again")  # the same clone again
    await spot.bus.publish_event(k.INGEST_CLONE, "clone", k.CloneReport(session_id=999_999, clone_path="/x/y"),
                                 event_id="clone-unknown")

    async def stored() -> bool:
        rows = await spot.sql("SELECT clone_path, agent_subdirectory, clone_scaffolded, clone_host, version "
                              "FROM spot_gate.sessions WHERE id = :i", i=s.id)
        return rows[0].clone_path is not None

    await eventually(stored)

    async def unknown_dropped() -> bool:
        return any("does not exist" in r.getMessage() for r in caplog.records)

    await eventually(unknown_dropped)
    [row] = await spot.sql("SELECT clone_path, agent_subdirectory, clone_scaffolded, clone_host, version "
                           "FROM spot_gate.sessions WHERE id = :i", i=s.id)
    assert (row.clone_path, row.agent_subdirectory, row.clone_scaffolded, row.clone_host) == (
        clone.clone_path, "services/web", True, "runtime-1")
    assert row.version == s.version + 1  # the repeated report wrote nothing
    # Acked, not retried forever: nothing is left pending on the durable consumer.
    info = await spot.bus.js_api("CONSUMER.INFO.ZIMMER_INGEST.spot_gate_clones")
    assert (info["num_pending"], info["num_ack_pending"]) == (0, 0), info


async def test_a_late_older_report_never_rolls_a_re_clone_back(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = await spawn(spot)
    await report(spot, s.id, f"{CLONES}/new", at=spot.clock.now())
    await report(spot, s.id, f"{CLONES}/old", at=spot.clock.now() - timedelta(minutes=5))
    assert (await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=s.id))).clone_path == f"{CLONES}/new"


async def test_a_report_the_sweepers_could_never_match_is_refused(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    s = await spawn(spot)
    for path, sub in (("relative/clone", None), ("/", None), (f"{CLONES}/x", "../elsewhere"), (f"{CLONES}/x", "/etc")):
        with pytest.raises(ZimmerError) as refused:
            await report(spot, s.id, path, agent_subdirectory=sub)
        assert refused.value.code.value == "invalid", path


# ---- ownership ------------------------------------------------------------------------------

async def test_ownership_by_path_and_by_basename_whatever_the_status(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Tracked-path check: a directory whose basename matches any session row's clone_path is never
    a candidate, whatever that session's status. Only directories with no owning row at all are
    eligible. The query is unscoped, because it decides deletions."""
    ids = {status: await cloned(spot, f"zimmer-{status}-1785661439-005ceef3", status=status)
           for status in ("waiting", "running", "needs_input", "archived", "failed")}
    asked = [f"{CLONES}/zimmer-{status}-1785661439-005ceef3" for status in ids] + [f"{CLONES}/nobody-1", "nobody-2"]
    answers = await owners(spot, *asked)
    assert [a.path for a in answers] == asked  # one answer per asked path, in order
    for status, answer in zip(ids, answers, strict=False):
        assert answer.tracked_by == [ids[status]], status
        assert answer.basename == f"zimmer-{status}-1785661439-005ceef3"
        assert answer.drift == []
    assert [(a.tracked_by, a.protected_by) for a in answers[-2:]] == [([], []), ([], [])]
    by_basename = await owners(spot, "zimmer-archived-1785661439-005ceef3")  # a bare basename
    assert by_basename[0].tracked_by == [ids["archived"]] and by_basename[0].drift == []


async def test_a_basename_match_at_another_path_is_drift(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Ownership is matched on the expanded path or the basename. Clone names carry a timestamp and a
    random suffix, so a basename is a globally unique handle that survives a stored clone_path which
    cannot be reconciled with the path being swept — a symlinked or relocated clones base. A
    directory saved by its basename while its owner's stored path points elsewhere is clone_path
    canonicalization drift (#671)."""
    sid = await cloned(spot, "zimmer-main-1785661439-aaaa", status="archived")
    [moved, same, trailing] = await owners(spot, "/mnt/relocated/zimmer-main-1785661439-aaaa",
                                           f"{CLONES}/zimmer-main-1785661439-aaaa",
                                           f"{CLONES}/zimmer-main-1785661439-aaaa/")
    assert (moved.tracked_by, moved.drift) == ([sid], [sid])
    assert (same.tracked_by, same.drift) == ([sid], [])
    assert (trailing.tracked_by, trailing.drift) == ([sid], [])  # a trailing slash is no other path


async def test_live_and_freshly_unarchived_sessions_are_protected(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Session.reap_protected is what tells the two apart. UnarchiveSessionService stamps
    unarchive_started_at on the row before it does any work and drops it in an ensure, and the scope
    treats a session carrying a fresh stamp as live whatever its status says."""
    live = {status: await cloned(spot, f"live-{status}", status=status) for status in ("waiting", "running",
                                                                                       "needs_input")}
    ended = {status: await cloned(spot, f"ended-{status}", status=status) for status in ("archived", "failed")}
    # Archived from failed: unarchived, it is failed again (not live), and only its stamp protects it.
    unarchiving = await cloned(spot, "unarchiving", status="failed")
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=unarchiving))
    assert (await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=unarchiving))).status == "failed"
    answers = await owners(spot, *(f"{CLONES}/live-{s}" for s in live), *(f"{CLONES}/ended-{s}" for s in ended),
                           f"{CLONES}/unarchiving")
    assert [a.protected_by for a in answers] == [[i] for i in live.values()] + [[], []] + [[unarchiving]]
    exist = await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[*live.values(), *ended.values(),
                                                                            unarchiving]))
    assert exist.protected == sorted([*live.values(), unarchiving])


async def test_a_stamp_older_than_the_grace_protects_nothing(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The stamp is honoured for UNARCHIVE_GRACE_PERIOD (30 minutes) and no longer — an unarchive
    that crashes between the stamp and the clear must not pin a clone on disk forever."""
    fresh, stale = await cloned(spot, "fresh", status="failed"), await cloned(spot, "stale", status="failed")
    await spot.sql("UPDATE spot_gate.sessions SET unarchive_started_at = now() - interval '29 minutes' WHERE id = :i",
                   i=fresh)
    await spot.sql("UPDATE spot_gate.sessions SET unarchive_started_at = now() - interval '31 minutes' WHERE id = :i",
                   i=stale)
    [f, s] = await owners(spot, f"{CLONES}/fresh", f"{CLONES}/stale")
    assert (f.protected_by, s.protected_by) == ([fresh], [])
    assert (await spot.bus.request(k.UNARCHIVE_RESTORED, k.UnarchiveRestored(
        session_id=stale, outcome="restored"))).cleared is False  # it had lapsed


async def test_the_stamp_is_cleared_by_unarchive_restored_and_by_archive(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    a, b = await cloned(spot, "restored", status="failed"), await cloned(spot, "archived-again", status="failed")
    for sid in (a, b):
        await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=sid))
        await spot.bus.request(c.UNARCHIVE, c.SessionRef(session_id=sid))
    assert [x.protected_by for x in await owners(spot, f"{CLONES}/restored", f"{CLONES}/archived-again")] == [[a], [b]]
    done = await spot.bus.request(k.UNARCHIVE_RESTORED, k.UnarchiveRestored(session_id=a, outcome="restored"))
    assert (done.session_id, done.cleared) == (a, True)
    again = await spot.bus.request(k.UNARCHIVE_RESTORED, k.UnarchiveRestored(session_id=a, outcome="restored"))
    assert again.cleared is False
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=b))
    assert [x.protected_by for x in await owners(spot, f"{CLONES}/restored", f"{CLONES}/archived-again")] == [[], []]
    rows = await spot.sql("SELECT count(*) AS n FROM spot_gate.sessions WHERE unarchive_started_at IS NOT NULL")
    assert rows[0].n == 0
    with pytest.raises(ZimmerError) as missing:
        await spot.bus.request(k.UNARCHIVE_RESTORED, k.UnarchiveRestored(session_id=999_999, outcome="failed"))
    assert missing.value.code.value == "not_found"


async def test_one_query_for_the_batch_through_the_basename_index(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    from sqlalchemy import text

    from zimmer_spot_gate.store.clones import OWNERSHIP

    for i in range(3):
        await cloned(spot, f"indexed-{i}")
    async with spot.service.engine.connect() as conn:
        await conn.execute(text("SET enable_seqscan = off"))  # a 3-row table: make the index the only way
        state = OWNERSHIP.compile(dialect=conn.dialect).construct_expanded_state(
            {"paths": [f"{CLONES}/indexed-1", "indexed-2"]})
        plan = await conn.exec_driver_sql("EXPLAIN " + state.statement,
                                          tuple(state.parameters[n] for n in state.positiontup or ()))
        assert "sessions_clone_basename" in "\n".join(r[0] for r in plan)


# ---- existence and listing -------------------------------------------------------------------

async def test_which_of_these_ids_exist_and_an_empty_table(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """Session.unscoped.where(id: candidates) asks "which of these ids exist?", never "list every
    id". Empty sessions table: aborts the whole sweep."""
    empty = await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[1, 2, 3]))
    assert (empty.existing, empty.protected, empty.any_sessions) == ([], [], False)
    assert (await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[]))).any_sessions is False
    archived = await cloned(spot, "gone-soon", status="archived")
    live = (await spawn(spot)).id
    answer = await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[live, archived, 999_999, live]))
    assert (answer.existing, answer.protected, answer.any_sessions) == (sorted([live, archived]), [live], True)
    assert (await spot.bus.request(k.SESSIONS_EXIST, k.SessionIdsQuery(ids=[999_999]))).any_sessions is True


async def test_session_clones_pages_by_id_live_or_all_and_by_host(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    made = []
    for i in range(7):
        s = await spawn(spot)
        await report(spot, s.id, f"{CLONES}/paged-{i}", host="runtime-a" if i % 2 else "runtime-b",
                     agent_subdirectory="app" if i == 0 else None)
        made.append(s.id)
    await spawn(spot)  # no clone: never listed
    unknown_host = await spawn(spot)
    await report(spot, unknown_host.id, f"{CLONES}/paged-unknown-host")
    await spot.bus.request(c.ARCHIVE, c.SessionRef(session_id=made[3]))

    async def pages(**q: object) -> list[list[int]]:
        out, after = [], 0
        while True:
            page = await spot.bus.request(k.SESSION_CLONES, k.SessionClonesQuery(after_id=after, limit=2, **q))
            out.append([x.session_id for x in page.clones])
            if page.next_after_id is None:
                return out
            after = page.next_after_id

    everything = [*made, unknown_host.id]
    assert sum(await pages(scope="all"), []) == everything
    assert [len(p) for p in await pages(scope="all")] == [2, 2, 2, 2]
    assert sum(await pages(scope="live"), []) == [i for i in everything if i != made[3]]
    # A clone whose host was never reported may be on any host's disk: every host's answer keeps it.
    assert sum(await pages(scope="all", host="runtime-a"), []) == [*made[1::2], unknown_host.id]
    first = (await spot.bus.request(k.SESSION_CLONES, k.SessionClonesQuery(scope="all", limit=1))).clones[0]
    assert (first.clone_path, first.agent_subdirectory, first.host, first.reap_protected) == (
        f"{CLONES}/paged-0", "app", "runtime-b", True)


# ---- warnings -------------------------------------------------------------------------------

async def test_a_refused_reap_leaves_a_warning_get_session_shows(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """A refusal logs at .error and writes a durable warning to the session. A refusal is never
    routine — it means a reaper's snapshot went stale and this guard caught it."""
    s = await spawn(spot)
    assert (await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=s.id))).warnings == []
    for n in range(7):
        w = await spot.bus.request(k.RECORD_SESSION_WARNING, k.SessionWarningIn(
            session_id=s.id, kind="clone_reap_refused", message=f"refusal {n}", source="sweeper/orphan_clone_sweep"))
        assert (w.session_id, w.kind, w.message) == (s.id, "clone_reap_refused", f"refusal {n}")
    view = await spot.bus.request(c.GET_SESSION, c.SessionRef(session_id=s.id))
    assert [x.message for x in view.warnings] == [f"refusal {n}" for n in (6, 5, 4, 3, 2)]  # the newest five
    listed = await spot.bus.request(c.LIST_SESSIONS, c.SessionQuery(ids=[s.id]))
    assert listed.sessions[0].warnings == []  # lists stay lean
    with pytest.raises(ZimmerError) as missing:
        await spot.bus.request(k.RECORD_SESSION_WARNING, k.SessionWarningIn(
            session_id=999_999, kind="clone_reap_refused", message="m", source="sweeper"))
    assert missing.value.code.value == "not_found"


# ---- hostile input ------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "body"), [
    (k.CLONE_OWNERSHIP, {"paths": ["/srv/zimmer/clones/a\u0000b"]}),
    (k.CLONE_OWNERSHIP, {"paths": ["/srv/zimmer/clones/\ud800"]}),
    (k.CLONE_OWNERSHIP, {"paths": [f"/srv/c/{i}" for i in range(5_000)]}),
    (k.CLONE_OWNERSHIP, {"paths": []}),
    (k.CLONE_OWNERSHIP, {"paths": ["/" + "a" * 5_000]}),
    (k.SESSIONS_EXIST, {"ids": list(range(1, 5_002))}),
    (k.SESSIONS_EXIST, {"ids": [2**63]}),
    (k.SESSIONS_EXIST, {"ids": [-1]}),
    (k.SESSIONS_EXIST, {"ids": ["1"]}),
    (k.SESSION_CLONES, {"limit": 0}),
    (k.SESSION_CLONES, {"host": "a/../b"}),
    (k.RECORD_SESSION_WARNING, {"session_id": 1, "kind": "k\u0000", "message": "m", "source": "s"}),
    (k.RECORD_SESSION_WARNING, {"session_id": 1, "kind": "k", "message": "\udfff", "source": "s"}),
    (k.UNARCHIVE_RESTORED, {"session_id": 1, "outcome": "maybe"}),
    (k.DELETE_SESSION, {"session_id": 0}),
])
async def test_hostile_requests_are_refused_by_the_contract(spot, spec, body) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    raw = json.dumps(body).encode()  # json.dumps escapes a lone surrogate as \\ud800, which JSON allows
    reply = json.loads((await spot.bus.nc.request(spec.subject, raw, timeout=10)).data)
    assert reply["ok"] is False and reply["error"]["code"] in ("invalid", "too_large"), reply


async def test_an_asked_path_that_names_no_clone_is_refused_naming_it(spot) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    for bad in ("relative/dir", "/", "..", "/srv/.."):
        with pytest.raises(ZimmerError) as refused:
            await owners(spot, f"{CLONES}/fine", bad)
        assert refused.value.code.value == "invalid" and refused.value.details["index"] == 1, bad
    with pytest.raises(ValidationError):
        k.CloneOwnershipQuery(paths=["x"] * (k.OWNERSHIP_BATCH_MAX + 1))
