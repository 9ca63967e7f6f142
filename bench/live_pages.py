"""Live pages under load (issue 32 #1): 50 open operator pages on a `zimmer up` stack of its own,
events driven over REST, and what the gateway spends on them.

Each "page" is what a browser tab does: it holds `GET /live?page=<family>` open and, on every
`changed` notice, re-fetches its page (the HTML live.js merges). Families are spread over Issues,
Ranked, Sessions, a session's page, Quotas and Health. The driver alternates a backlog append and
a session's precedence change (each publishes its event to ZIMMER_EVENTS) at `--rate` a second.

Four phases of `--seconds` each, measured on the gateway process alone (CPU seconds user+system,
RSS sampled every second, its peak reported), so every figure has a baseline from the same run:

1. idle: no page, no event;
2. events: the same driven events, no page open;
3. pages idle: 50 pages open, no event (the cost of holding the streams: heartbeats);
4. pages + events: 50 pages open and the driven events.

A re-fetch sends what live.js sends (`X-Zimmer-Live: 1`), so a burst of re-fetches of one address
is one render (web/live_renders.py); `--no-shared` leaves the header off (every page renders).

Reported: each phase's CPU seconds and peak RSS, CPU of 4 over 2 and RSS of 4 over 1, the notice
latency (REST answer to notice at the page; Health's pages left out, its job runs wake it too) and the
notice-to-fresh-page latency, p50/p99, and the
gateway's own counters (clients, notices, drops). Afterwards the streams are closed and the clients
gauge must be back to 0.

    .venv/bin/python -m bench.live_pages [--pages 50] [--seconds 30] [--rate 4] [--no-shared]

Writes bench/results/live_pages-<UTC stamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import psutil

from bench.harness import machine_info, percentile
from zimmer_cli.scenario_stack import OwnedStack

RESULTS = Path(__file__).resolve().parent / "results"
API_KEY, OPERATOR = "bench-live-fleet-key", "bench-live-operator-token"
LIVE_FETCH = {"Accept": "text/html", "X-Zimmer-Live": "1"}
FAMILIES = ("issues", "ranked", "sessions", "session", "quotas", "health")


class Page:
    """One open tab: its stream, and a re-fetch of its page on each notice."""

    def __init__(self, family: str, path: str, headers: dict[str, str]) -> None:
        self.family, self.path, self.headers = family, path, headers
        self.notices: list[float] = []
        self.fetched: list[float] = []  # notice-to-fresh-page seconds
        self.ready = asyncio.Event()

    async def run(self, http: httpx.AsyncClient) -> None:
        async with http.stream("GET", "/live", params={"page": self.family}, timeout=None) as stream:
            event = None
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line == "" and event:
                    if event in ("live", "paused"):
                        self.ready.set()
                    elif event == "changed":
                        at = time.perf_counter()
                        self.notices.append(at)
                        r = await http.get(self.path, headers=self.headers)
                        r.raise_for_status()
                        self.fetched.append(time.perf_counter() - at)
                    event = None


async def signed_in(base: str) -> httpx.AsyncClient:
    http = httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=200))
    form = (await http.get("/signin")).text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf, "no sign-in form"
    r = await http.post("/signin", data={"csrf": csrf.group(1), "next": "/issues", "token": OPERATOR})
    assert r.status_code in (200, 303), r.status_code
    return http


class Gateway:
    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)

    def cpu(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    async def phase(self, seconds: float, work: Any = None) -> dict[str, float]:
        """CPU seconds and peak RSS of the gateway while `work` (a coroutine) runs for `seconds`."""
        task = asyncio.ensure_future(work) if work is not None else None
        cpu0, peak, end = self.cpu(), self.proc.memory_info().rss, time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(1.0)
            peak = max(peak, self.proc.memory_info().rss)
        cpu = self.cpu() - cpu0
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return {"cpu_seconds": round(cpu, 3), "peak_rss_mib": round(peak / 2**20, 1)}


NUMBERS = itertools.count(1)


async def drive(fleet: httpx.AsyncClient, rate: float, sessions: list[int], sent: list[float]) -> None:
    """Alternately a backlog append and a precedence change, `rate` a second; `sent` gets the moment
    each REST call answered."""
    while True:
        n = next(NUMBERS)
        started = time.perf_counter()
        if n % 2 == 0:
            r = await fleet.post("/api/v1/work_backlog_items", json={
                "key": f"bench#{n}", "title": f"bench item {n}", "estimated_cost": "small",
                "issue_url": f"https://github.com/acme/bench/issues/{n}"})
        else:
            r = await fleet.patch(f"/api/v1/sessions/{sessions[n % len(sessions)]}", json={"precedence": n % 1000})
        r.raise_for_status()
        sent.append(time.perf_counter())
        await asyncio.sleep(max(0.0, 1.0 / rate - (time.perf_counter() - started)))


def latencies(pages: list[Page], sent: list[float]) -> dict[str, float | None]:
    """Each notice's delay after the last REST answer before it (a burst coalesces into one).
    Health's pages are left out: the services' own job runs wake them too, at moments no driven
    event explains."""
    delays = []
    for page in (p for p in pages if p.family != "health"):
        for at in page.notices:
            before = [s for s in sent if s <= at]
            if before:
                delays.append(at - before[-1])
    fetched = [f for p in pages if p.family != "health" for f in p.fetched]

    def ms(values: list[float], q: float) -> float | None:
        return round(1000 * percentile(values, q), 1) if values else None
    return {"notice_p50_ms": ms(delays, 50), "notice_p99_ms": ms(delays, 99),
            "fresh_page_p50_ms": ms(fetched, 50), "fresh_page_p99_ms": ms(fetched, 99),
            "notices": len(delays), "re_fetches": len(fetched)}


def counters(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("zimmer_gateway_live_clients", "zimmer_gateway_live_notices_total",
                     "zimmer_gateway_live_dropped_clients_total", "zimmer_gateway_live_events_total",
                     "zimmer_gateway_live_renders_shared_total"):
            if line.startswith(name):
                found[name] = found.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return found


async def bench(stack: OwnedStack, pages_n: int, seconds: float, rate: float, shared: bool) -> dict[str, Any]:
    runtime = json.loads((stack.data / "runtime.json").read_text())
    gateway = Gateway(int(runtime["services"]["gateway"]["pid"]))
    fleet = httpx.AsyncClient(base_url=stack.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
    sessions = []
    for i in range(5):
        r = await fleet.post("/api/v1/sessions", json={"start": False, "genesis": "api", "title": f"bench {i}"})
        r.raise_for_status()
        sessions.append(r.json()["session"]["id"])
    http = await signed_in(stack.url)
    await asyncio.sleep(2.0)  # the stack settles
    phases: dict[str, dict[str, float]] = {}
    phases["idle"] = await gateway.phase(seconds)
    sent_alone: list[float] = []
    phases["events"] = await gateway.phase(seconds, drive(fleet, rate, sessions, sent_alone))

    pages = []
    for i in range(pages_n):
        family = FAMILIES[i % len(FAMILIES)]
        pages.append(Page(family, f"/sessions/{sessions[i % len(sessions)]}" if family == "session" else f"/{family}",
                          LIVE_FETCH if shared else {"Accept": "text/html"}))
    tasks = [asyncio.ensure_future(p.run(http)) for p in pages]
    await asyncio.wait_for(asyncio.gather(*(p.ready.wait() for p in pages)), 60)
    phases["pages_idle"] = await gateway.phase(seconds)
    sent: list[float] = []
    phases["pages_events"] = await gateway.phase(seconds, drive(fleet, rate, sessions, sent))
    await asyncio.sleep(2.0)  # the last re-fetches land
    during = counters((await http.get("/metrics")).text)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2.0)
    after = counters((await http.get("/metrics")).text)
    await http.aclose()
    await fleet.aclose()
    events = phases["pages_events"]["cpu_seconds"]
    return {
        "benchmark": "live_pages", "at": datetime.now(UTC).isoformat(), "machine": machine_info(),
        "pages": pages_n, "seconds_per_phase": seconds, "events_per_second": rate, "shared_renders": shared,
        "events_driven": {"events": len(sent_alone), "pages_events": len(sent)},
        "phases": phases,
        "cpu_ratio_pages_events_to_events": round(events / max(phases["events"]["cpu_seconds"], 1e-9), 2),
        "cpu_ms_per_event_per_page": round(1000 * (events - phases["events"]["cpu_seconds"])
                                           / max(len(sent), 1) / pages_n, 3),
        "rss_ratio_pages_events_to_idle": round(phases["pages_events"]["peak_rss_mib"]
                                                / phases["idle"]["peak_rss_mib"], 3),
        "latency": latencies(pages, sent),
        "gateway_counters_with_pages": during, "gateway_counters_after_close": after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--no-shared", action="store_true", help="every re-fetch renders (no X-Zimmer-Live)")
    args = parser.parse_args()
    stack = OwnedStack(Path(tempfile.mkdtemp(prefix="zimmer-live-")),
                       env={"ZIMMER_API_KEY": API_KEY, "ZIMMER_OPERATOR_TOKEN": OPERATOR})
    stack.start()
    try:
        report = asyncio.run(bench(stack, args.pages, args.seconds, args.rate, not args.no_shared))
    finally:
        stack.stop()
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"live_pages-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "machine"}, indent=2, default=str))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
