"""What the simulated fleet does, in numbers: one frozen `Profile` per run, chosen by name.

The simulator never fakes the services' clock. To show a whole quota cycle in minutes it chooses
what it reports instead: accounts with small capacity, and a 5-hour window that "ends" a few
minutes after the run starts (the readings say so; the services believe the readings).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# Where sessions come from and how often (seed 004's geneses; web_ui and slack derive priority,
# the rest spot): the fleet spawns with these weights.
GENESIS_MIX: dict[str, float] = {"slack": 0.2, "github_issue": 0.25, "schedule": 0.15, "web_ui": 0.15, "api": 0.25}
CLAUDE_MODELS = ("claude-opus-4-5", "claude-sonnet-4-5", "claude-haiku-4-5")
CODEX_MODELS = ("gpt-5-codex", "gpt-5.1-codex-mini")
WEEK_IN_FIVE_HOUR_WINDOWS = 7 * 24 / 5
# Dollars per million tokens (input, output): the simulator's own estimate of what a request
# costs an account, to make its utilization climb with the spend routed to it.
SIM_PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0), "claude-sonnet-4-5": (3.0, 15.0), "claude-haiku-4-5": (1.0, 5.0),
}


@dataclass(frozen=True)
class Profile:
    sessions: int = 12  # live sessions the fleet keeps (not archived)
    spawn_every: tuple[float, float] = (2.0, 8.0)  # seconds between arrivals while under `sessions`
    codex_share: float = 0.2
    turn_seconds: tuple[float, float] = (6.0, 30.0)
    request_every: tuple[float, float] = (1.0, 3.0)  # model requests inside a turn
    tokens_in: tuple[int, int] = (2_000, 30_000)
    tokens_out: tuple[int, int] = (200, 4_000)
    think_seconds: tuple[float, float] = (2.0, 15.0)  # a person answering, before a follow-up
    # After a turn: follow up, sleep, archive, or lose the account's credentials (else: idle).
    p_follow_up: float = 0.45
    p_sleep: float = 0.08
    p_archive: float = 0.25
    p_auth_outage: float = 0.0
    sleep_seconds: tuple[float, float] = (10.0, 40.0)
    idle_archive_seconds: float = 90.0  # an idle session (needs_input, nobody answers) is archived
    auth_outage_seconds: tuple[float, float] = (20.0, 60.0)
    accounts: int = 3
    capacity_five_hour: float = 30.0  # dollars a 5-hour window holds, per account
    # The week is compressed as much as the 5-hour window (33.6 of them to a week) and holds what
    # a fleet that fills every 5-hour window at twice its sustainable pace would spend: left at
    # real length, its pacing curve ($/min sustainable over days) held every session the moment
    # the gate priced the fleet's burn.
    capacity_seven_day: float = 4_000.0
    five_hour_cycle_seconds: float = 480.0  # the simulated window "ends" this long after it starts
    reading_every: float = 15.0  # unasked quota readings
    log_lines_per_request: tuple[int, int] = (1, 4)
    large_clone_share: float = 0.1  # clones with a large file in them (bytes below)
    large_clone_bytes: int = 2_000_000
    orphan_clones: int = 3  # directories left on disk with no session, made old
    orphan_bytes: int = 4096  # in each
    # Work comes in bursts: for this share of every 5-hour cycle (its end) the fleet is quiet, so the
    # pool drains, the window's reset shows as room and the ceiling sweep resumes what it paused.
    quiet_share: float = 0.0
    # Spawned sessions declare a precedence drawn from this range (None: the default, 0), so a
    # resume order is something to check.
    precedences: tuple[int, int] | None = None
    github: bool = True
    github_every: float = 6.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seven_day_cycle_seconds(self) -> float:
        return self.five_hour_cycle_seconds * WEEK_IN_FIVE_HOUR_WINDOWS

    def with_(self, **changes: Any) -> Profile:
        return replace(self, **changes)


PROFILES: dict[str, Profile] = {
    # `zimmer up`'s attached fleet: enough to fill every page within a minute, a quota cycle in ten.
    # Three $30 accounts: a dozen sessions bring the gate to hold spot work and the ceiling sweep to
    # pause it within about four minutes.
    # Spawns declare precedences 0–50, so the sweep's resumes come in an order worth reading.
    "demo": Profile(turn_seconds=(15.0, 60.0), quiet_share=0.4, precedences=(0, 50)),
    # The test suite's short forms: quick turns, few sessions.
    "short": Profile(sessions=6, spawn_every=(0.5, 2.0), turn_seconds=(2.0, 6.0), request_every=(0.5, 1.5),
                     think_seconds=(0.5, 3.0), sleep_seconds=(3.0, 8.0), idle_archive_seconds=20.0,
                     five_hour_cycle_seconds=90.0, reading_every=5.0, github_every=3.0),
}
