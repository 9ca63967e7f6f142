"""Fault injection under load: kill -9 of NATS and of PostgreSQL while appends are in flight.

What must hold (DESIGN §5, "a 503 means nothing happened"):
- every request answered 2xx has its effect exactly once;
- no request answered 503 (or not answered at all) takes effect after its answer: its key is in
  the table at the end only if it already was when the answer came (the lost-reply case, counted
  and printed), and a retry with the same Idempotency-Key gets the first answer back;
- an outage is a 503 naming the dependency, never a 500; /readyz says not ready, naming it;
- the outage is logged once when it starts and once when it ends, not a traceback per request;
- the system answers 2xx again by itself once the server is back.

All real: five in-process services, an embedded nats-server / postgres the test kills with
SIGKILL and starts again on the same port / data. Recovery times are printed, never asserted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from zimmer_cli.embedded import free_port, pg_accepts_connections, prepare_pgdata, start_nats, start_postmaster, stop_postmaster
from zimmer_cli.registry import SERVICES, START_ORDER

FLEET = {"Authorization": "Bearer test-fleet-key"}
WORKERS = 6


@contextlib.asynccontextmanager
async def five_services(settings: Callable[[], Any]) -> AsyncIterator[str]:
    services: dict[str, Any] = {}
    try:
        for name in START_ORDER:
            module, attr = SERVICES[name].split(":")
            services[name] = getattr(importlib.import_module(module), attr)(settings())
            await services[name].start()
        yield f"http://127.0.0.1:{services['gateway'].http_port}"
    finally:
        for name in reversed(START_ORDER):
            if name in services:
                await services[name].stop()


@dataclass
class Load:
    """Appends of unique keys from `WORKERS` callers, each answer kept with what the table held then."""

    url: str
    database_url: str
    answers: dict[str, int] = field(default_factory=dict)  # key → status (0: not answered)
    present_at_answer: dict[str, bool] = field(default_factory=dict)
    problems: list[dict[str, Any]] = field(default_factory=list)
    problem_of: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_ok_after: dict[str, float] = field(default_factory=dict)
    _n: int = 0
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def key(self) -> str:
        self._n += 1
        return f"load#{self._n}"

    async def run(self) -> None:
        db = await asyncpg.create_pool(self.database_url, min_size=1, max_size=2)
        try:
            async with httpx.AsyncClient(base_url=self.url, headers=FLEET, timeout=15) as http:
                await asyncio.gather(*(self._worker(http, db) for _ in range(WORKERS)))
        finally:
            await db.close()

    async def _worker(self, http: httpx.AsyncClient, db: Any) -> None:
        while not self._stop.is_set():
            key = self.key()
            body = {"key": key, "issue_url": f"https://github.com/acme/load/issues/{self._n}",
                    "estimated_cost": "small", "title": key}
            try:
                r = await http.post("/api/v1/work_backlog_items", json=body, headers={"Idempotency-Key": key})
                status = r.status_code
                if status >= 400:
                    self.problems.append(r.json())
                    self.problem_of[key] = r.json()
            except httpx.HTTPError:
                status = 0
            self.answers[key] = status
            if status // 100 == 2:
                for mark, at in list(self.first_ok_after.items()):
                    if at < 0:
                        self.first_ok_after[mark] = time.monotonic()
            else:
                self.present_at_answer[key] = await _present(db, key)
                await asyncio.sleep(0.05)

    def mark(self, name: str) -> None:
        """From now, note when the next 2xx answer comes (a recovery)."""
        self.first_ok_after[name] = -1.0
        self.first_ok_after[f"{name}.at"] = time.monotonic()

    def recovered_after(self, name: str) -> float | None:
        ok = self.first_ok_after.get(name, -1.0)
        return None if ok < 0 else ok - self.first_ok_after[f"{name}.at"]

    def stop(self) -> None:
        self._stop.set()


async def _present(db: Any, key: str) -> bool:
    with contextlib.suppress(Exception):  # PostgreSQL itself may be the one that is down
        return bool(await db.fetchval("SELECT count(*) FROM backlog.work_backlog_items WHERE key = $1", key))
    return False


async def wait_until(what: str, check: Callable[[], Any], deadline: float = 60.0) -> Any:
    end = time.monotonic() + deadline
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline:g}s waiting for {what}")
        await asyncio.sleep(0.1)


async def check_nothing_late_and_nothing_twice(load: Load, database_url: str) -> dict[str, int]:
    """The assertions both tests share; returns the tallies it printed."""
    conn = await asyncpg.connect(database_url)
    try:
        rows = {r["key"]: r["n"] for r in await conn.fetch(
            "SELECT key, count(*) AS n FROM backlog.work_backlog_items WHERE key LIKE 'load#%' GROUP BY key")}
    finally:
        await conn.close()
    ok = [k for k, s in load.answers.items() if s // 100 == 2]
    refused = [k for k, s in load.answers.items() if s // 100 != 2]
    assert all(rows.get(k) == 1 for k in ok), "a 2xx append is missing or doubled"
    late = [k for k in refused if rows.get(k) and not load.present_at_answer.get(k)]
    assert not late, f"{len(late)} requests answered {sorted({load.answers[k] for k in late})} took effect later: {late[:5]}"
    assert all(n == 1 for n in rows.values()), "some key was appended twice"
    already = [k for k in refused if load.present_at_answer.get(k)]
    # `sent: false` promises nothing happened; only a request that left and lost its answer may
    # have taken effect (before the answer), and its problem says so.
    assert all(load.problem_of.get(k, {}).get("details", {}).get("sent", True) for k in already), already
    statuses = sorted({load.answers[k] for k in refused})
    assert set(statuses) <= {0, 503}, f"an outage answered something other than 503: {statuses}"
    tallies = {"2xx": len(ok), "refused": len(refused),
               "refused_with_effect_already_at_answer": sum(load.present_at_answer.get(k, False) for k in refused)}
    return tallies


async def retry_refused_with_their_keys(load: Load, url: str, database_url: str) -> None:
    """A client told 503 retries with the same key: each gets a 2xx, and nothing is doubled."""
    refused = [k for k, s in load.answers.items() if s // 100 != 2]
    async with httpx.AsyncClient(base_url=url, headers=FLEET, timeout=15) as http:
        for key in refused:
            n = int(key.split("#")[1])
            r = await http.post("/api/v1/work_backlog_items", headers={"Idempotency-Key": key}, json={
                "key": key, "issue_url": f"https://github.com/acme/load/issues/{n}", "estimated_cost": "small",
                "title": key})
            assert r.status_code == 201, r.text
    conn = await asyncpg.connect(database_url)
    try:
        doubled = await conn.fetchval("SELECT count(*) FROM (SELECT key FROM backlog.work_backlog_items "
                                      "WHERE key LIKE 'load#%' GROUP BY key HAVING count(*) > 1) d")
    finally:
        await conn.close()
    assert doubled == 0


async def test_nats_killed_and_restarted_under_load(settings_factory, database_url: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    port, store = free_port(), tmp_path / "killable-nats"
    server = await asyncio.to_thread(start_nats, store, port=port)
    url_of_nats = server.url
    try:
        async with five_services(lambda: settings_factory(nats_url=url_of_nats)) as url:
            load = Load(url, database_url)
            running = asyncio.create_task(load.run())
            await wait_until("some appends", lambda: sum(s == 201 for s in load.answers.values()) >= 20)
            server.process.send_signal(signal.SIGKILL)
            await asyncio.to_thread(server.process.wait)
            async with httpx.AsyncClient(base_url=url, timeout=15) as http:
                ready = await http.get("/readyz")
                assert ready.status_code == 503 and "message bus" in ready.json()["missing"]
                assert {k: ready.json()[k] for k in ("code", "retry_safe", "dependency")} == {
                    "code": "unavailable", "retry_safe": True, "dependency": "message bus"}
            await asyncio.sleep(3)  # the load keeps asking while NATS is down
            server = await asyncio.to_thread(start_nats, store, port=port)
            load.mark("restart")
            await wait_until("a 2xx after the restart", lambda: load.recovered_after("restart") is not None)
            await asyncio.sleep(1)
            load.stop()
            await running
            # Appends in flight when NATS died waited for an answer the bus lost: they name the bus
            # (they were `dependency: backlog`, the service that never heard them).
            named = {p.get("dependency") for p in load.problems if p.get("code") == "unavailable"}
            assert named <= {"message bus"}, load.problems[:5]
            await asyncio.sleep(3)  # past every deadline: anything that could still commit late would have
            tallies = await check_nothing_late_and_nothing_twice(load, database_url)
            await retry_refused_with_their_keys(load, url, database_url)
            async with httpx.AsyncClient(base_url=url, timeout=15) as http:
                await wait_until("ready again", lambda: _ready(http))
        with capsys.disabled():
            print(f"\n[measured] NATS kill -9: {tallies}; first 2xx {load.recovered_after('restart'):.2f}s after "
                  f"the restart; problems seen: {sorted({p.get('dependency', p.get('code')) for p in load.problems})}")
    finally:
        await asyncio.to_thread(server.stop)


async def _ready(http: httpx.AsyncClient) -> bool:
    return (await http.get("/readyz")).status_code == 200


async def test_postgres_killed_and_restarted_under_load(settings_factory, tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture,
                                                        capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    caplog.set_level(logging.INFO)
    layout = prepare_pgdata(tmp_path / "pg")
    log = tmp_path / "postgres.log"
    proc = start_postmaster(layout, log)
    try:
        await wait_until("postgres", lambda: asyncio.to_thread(pg_accepts_connections, layout.url("postgres")))
        admin = await asyncpg.connect(layout.url("postgres"))
        await admin.execute("CREATE DATABASE zimmer")
        await admin.close()
        database_url = layout.url("zimmer")
        async with five_services(lambda: settings_factory(database_url=database_url)) as url:
            load = Load(url, database_url)
            running = asyncio.create_task(load.run())
            await wait_until("some appends", lambda: sum(s == 201 for s in load.answers.values()) >= 20)
            errors_before = _errors(caplog)
            os.killpg(proc.pid, signal.SIGKILL)  # the postmaster and every backend
            await asyncio.to_thread(proc.wait)
            async with httpx.AsyncClient(base_url=url, timeout=15) as http:
                ready = await wait_until("readyz to notice", lambda: _not_ready(http))
            assert any(m.startswith("database (") for m in ready["missing"]), ready
            assert (ready["code"], ready["retry_safe"], ready["dependency"]) == ("unavailable", True, "database"), ready
            await asyncio.sleep(3)
            proc = await _restart_postmaster(layout, log)
            load.mark("restart")
            await wait_until("a 2xx after the restart", lambda: load.recovered_after("restart") is not None)
            await asyncio.sleep(1)
            load.stop()
            await running
            await asyncio.sleep(3)
            tallies = await check_nothing_late_and_nothing_twice(load, database_url)
            # Each refusal names what was down as its answerer saw it: the database (the backlog
            # answered), or the backlog (the gateway's deadline passed while the backlog waited on
            # the database it could not reach: "did not answer", or "no time left to ask").
            unnamed = [p for p in load.problems if p.get("dependency") not in ("database", "backlog")]
            assert not unnamed, unnamed[:3]
            assert any(p.get("dependency") == "database" for p in load.problems), load.problems[:3]
            await retry_refused_with_their_keys(load, url, database_url)
            errors = _errors(caplog)[len(errors_before):]
            tracebacks = [r for r in errors if r.exc_info]
            assert not tracebacks, [r.getMessage() for r in tracebacks][:5]
            outage_lines = [r for r in errors if r.getMessage() == "database unavailable"]
            assert 1 <= len(outage_lines) <= len(START_ORDER), [r.getMessage() for r in errors]
            assert any(r.getMessage() == "database available again" for r in caplog.records)
            gc.collect()  # a task whose exception nobody retrieved says so when it is collected
            unretrieved = [r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.ERROR]
            assert not unretrieved, unretrieved[:3]
        with capsys.disabled():
            print(f"\n[measured] PostgreSQL kill -9: {tallies}; first 2xx {load.recovered_after('restart'):.2f}s "
                  f"after the restart; ERROR lines during the outage: {len(errors)}")
    finally:
        stop_postmaster(proc)


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.ERROR and r.name.startswith("zimmer")]


async def _not_ready(http: httpx.AsyncClient) -> dict[str, Any] | None:
    r = await http.get("/readyz")
    return r.json() if r.status_code == 503 else None


async def _restart_postmaster(layout: Any, log: Path) -> Any:
    """A killed postmaster's shared memory and pid file can hold a new one off for a moment."""
    end = time.monotonic() + 60
    while True:
        proc = start_postmaster(layout, log)
        for _ in range(100):
            if await asyncio.to_thread(pg_accepts_connections, layout.url("postgres"), 0.5):
                return proc
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.1)
        if time.monotonic() > end:
            pytest.fail(f"postgres did not come back:\n{log.read_text()[-2000:]}")
        stop_postmaster(proc)
        await asyncio.sleep(0.5)
