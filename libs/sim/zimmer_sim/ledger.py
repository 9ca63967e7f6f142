"""The simulator's own record of what it did, to check the system's answers against.

Everything here is what the fleet *sent* or *saw*: spawns, turns, spend, log lines, prompts and
the order they came back in. The invariant checks compare it with what the control plane says
(REST, MCP) and list what does not match as violations.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class SessionRecord:
    session_id: int
    genesis: str
    runtime: str
    model: str
    account: str | None  # the Claude account it spends on (Codex: none)
    spawned_by_sim: bool
    spot_class: bool = False  # its priority class was spot when the fleet first saw it
    precedence: int = 0
    turn_in_flight: bool = False
    turns: int = 0
    archived: bool = False
    sent_prompts: list[str] = field(default_factory=list)  # ours, in the order we asked for them
    delivered_prompts: list[str] = field(default_factory=list)  # ours, as start_turn carried them
    spend_requests: int = 0
    spend_dollars: float = 0.0
    clone_path: str | None = None
    transcript_dir: str | None = None


@dataclass(frozen=True)
class Restart:
    """A restart turn the fleet was told to run: a pause's resume."""

    received: float  # the fleet's monotonic clock
    session_id: int
    precedence: int
    decided_at: datetime  # the command's own time: one sweep's resumes share its transaction's


@dataclass
class Ledger:
    sessions: dict[int, SessionRecord] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)  # request_turn answers
    commands: Counter[str] = field(default_factory=Counter)
    log_lines: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # per session
    violations: list[dict[str, Any]] = field(default_factory=list)
    max_running: int = 0
    restarts: list[Restart] = field(default_factory=list)
    stopped_sessions: set[int] = field(default_factory=set)  # every session told to stop a turn
    stop_reasons: Counter[str] = field(default_factory=Counter)
    # Prompts the gate admitted (or passed): their start_turn was committed with the answer.
    admitted: dict[str, tuple[int, datetime]] = field(default_factory=dict)  # prompt: (session, when)
    parked: dict[int, tuple[datetime, str | None]] = field(default_factory=dict)  # auth parks not yet started again
    turn_latencies: list[float] = field(default_factory=list)  # seconds per request_turn answer (retries included)
    tokens: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # model: [in, out]

    def violation(self, invariant: str, **detail: Any) -> None:
        self.violations.append({"invariant": invariant, **detail})

    def running(self) -> int:
        return sum(1 for s in self.sessions.values() if s.turn_in_flight)

    def turn_started(self, record: SessionRecord) -> None:
        record.turn_in_flight = True
        record.turns += 1
        self.counts["turns_started"] += 1
        self.max_running = max(self.max_running, self.running())

    def prompt_order_violations(self) -> list[dict[str, Any]]:
        """A held or queued prompt comes back exactly once, and in the order it was sent."""
        found = []
        for s in self.sessions.values():
            doubled = [p for p, n in Counter(s.delivered_prompts).items() if n > 1]
            delivered = set(s.delivered_prompts)
            sent_order = [p for p in s.sent_prompts if p in delivered]
            if doubled or sent_order != [p for p in s.delivered_prompts if p in set(s.sent_prompts)]:
                found.append({"session_id": s.session_id, "delivered_twice": doubled, "sent": sent_order,
                              "delivered": s.delivered_prompts})
        return found

    def admitted_never_started(self, before: datetime) -> list[dict[str, Any]]:
        """Prompts admitted before `before` whose start_turn never reached the fleet: lost commands."""
        out = []
        for prompt, (sid, at) in self.admitted.items():
            record = self.sessions.get(sid)
            if at < before and record is not None and prompt not in record.delivered_prompts:
                out.append({"session_id": sid, "prompt": prompt, "admitted_at": at.isoformat()})
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "sessions": len(self.sessions),
            "sessions_spawned": sum(1 for s in self.sessions.values() if s.spawned_by_sim),
            "archived": sum(1 for s in self.sessions.values() if s.archived),
            "turns": sum(s.turns for s in self.sessions.values()),
            "spend_requests": sum(s.spend_requests for s in self.sessions.values()),
            "spend_dollars": round(sum(s.spend_dollars for s in self.sessions.values()), 4),
            "log_lines": sum(self.log_lines.values()),
            "max_running": self.max_running,
            "counts": dict(self.counts),
            "outcomes": dict(self.outcomes),
            "commands": dict(self.commands),
            "violations": len(self.violations),
            "request_turn_p50_ms": _percentile_ms(self.turn_latencies, 0.50),
            "request_turn_p99_ms": _percentile_ms(self.turn_latencies, 0.99),
        }


def _percentile_ms(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)
