"""The failover benchmark's load: writers that alternate the two gateways, each write carrying an
Idempotency-Key and retried with it after every 503 or connection error until a 2xx.

The rate is bounded (`RATE` writes/s in all) so ten minutes of appends fit the backlog's bands:
appends rotate small/medium/large and the large band holds 500 unpinned items (then answers 409
`band_full`, rightly); half the writes are spawns (`start: false`, so nothing takes a slot).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx

ITEMS = "/api/v1/work_backlog_items"
SESSIONS = "/api/v1/sessions"
RATE = 4.0  # writes per second, all writers together
WRITERS = 3
WRITE_DEADLINE = 120.0  # one write retried across every outage, with the same key
COSTS = ("small", "medium", "large")


@dataclass
class Write:
    key: str
    path: str
    body: dict[str, Any]
    started: float  # time.monotonic()
    latency: float = 0.0  # first attempt to its 2xx, retries included
    attempts: int = 0


class Writes:
    def __init__(self, urls: list[str], api_key: str):
        self.urls = urls
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.stop = threading.Event()
        self.done: list[Write] = []
        self.statuses: Counter[int] = Counter()
        self.unfinished: list[str] = []
        self.refused: dict[str, str] = {}
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(WRITERS)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(WRITE_DEADLINE + 30)

    def _run(self, writer: int) -> None:
        n = 0
        interval = WRITERS / RATE
        with httpx.Client(timeout=10) as http:
            while not self.stop.is_set():
                n += 1
                t0 = time.monotonic()
                key = f"f{writer}-{n}"
                if n % 2:
                    number = (writer + 1) * 1_000_000 + n
                    path, body = ITEMS, {"key": f"acme#{number}", "estimated_cost": COSTS[(n // 2) % 3], "title": key,
                                         "issue_url": f"https://github.com/acme/acme/issues/{number}"}
                else:
                    path, body = SESSIONS, {"genesis": "schedule", "precedence": 5, "start": False, "title": key}
                self._write(http, Write(key, path, body, t0), writer + n)
                time.sleep(max(0.0, interval - (time.monotonic() - t0)))

    def _write(self, http: httpx.Client, write: Write, turn: int) -> None:
        while time.monotonic() - write.started < WRITE_DEADLINE:
            url = self.urls[turn % 2]
            turn += 1
            write.attempts += 1
            try:
                r = http.post(f"{url}{write.path}", json=write.body,
                              headers={**self.headers, "Idempotency-Key": write.key})
            except httpx.HTTPError:
                time.sleep(0.25)
                continue
            self.statuses[r.status_code] += 1
            if r.is_success:
                write.latency = time.monotonic() - write.started
                self.done.append(write)
                return
            if r.status_code not in (429, 503):
                self.refused[write.key] = f"{r.status_code} {r.text[:300]}"
                return
            time.sleep(0.25)
        self.unfinished.append(write.key)


def every_row(url: str, field: str, headers: dict[str, str], limit: int, **params: str) -> list[dict[str, Any]]:
    """Every row of a listing, following `next_offset`."""
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = httpx.get(url, params={**params, "limit": limit, "offset": offset}, headers=headers, timeout=30).json()
        rows += page[field]
        offset = page.get("next_offset")
    return rows
