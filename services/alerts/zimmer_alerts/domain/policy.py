"""When an alert reaches a human, as plain functions (seed 003 "Alerts", "Who is allowed to page";
issue 11). Two halves, as the seed has them:

- issues (GlitchTip's rule): events grouped by fingerprint; an issue notifies once, ever, and
  later events are only counted on it;
- the repeating page (Alertmanager's model; seed 003: "The ERROR record is the repeating page"):
  every error page is grouped per title. A condition keeps its group firing while it is still
  true; an error page with no condition keeps it firing while its events keep arriving, and it
  resolves once none arrived for one repeat interval (the log rule fires while ERROR records
  arrive). The group's first notification waits `group_wait` (30 s) so a burst arrives as one; a
  new condition or a new issue joining a notified group is sent at the next `group_interval`
  (5 min); a group still firing is sent again every `repeat_interval` (4 h). A warning notifies
  once and never repeats: only an error repeats. A resolved group is not sent again.

Who may page is decided here, once, from the environment: production pages; staging records
issues and pages nobody; development and test record locally and send nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from zimmer_common.settings import Environment

Sink = Literal["log", "issue_tracker", "slack", "alertmanager"]
PAGE_SINKS: frozenset[Sink] = frozenset({"slack", "alertmanager"})


def allowed_sinks(env: Environment) -> frozenset[Sink]:
    """The structured log record always; the issue tracker (Sentry/GlitchTip) in production and
    staging; the page sinks (Slack, Alertmanager) in production only."""
    if env is Environment.PRODUCTION:
        return frozenset({"log", "issue_tracker", *PAGE_SINKS})
    if env is Environment.STAGING:
        return frozenset({"log", "issue_tracker"})
    return frozenset({"log"})


def fingerprint(parts: list[str]) -> str:
    """The issue an event belongs to: the same parts, the same issue (order matters)."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def issue_notifies(already_notified: bool) -> bool:
    """An issue notifies once, ever; later events are counted on it."""
    return not already_notified


@dataclass(frozen=True)
class Timing:
    group_wait: timedelta = timedelta(seconds=30)
    group_interval: timedelta = timedelta(minutes=5)
    repeat_interval: timedelta = timedelta(hours=4)


@dataclass(frozen=True)
class PageGroup:
    """The conditions paging under one title, as the ledger holds them."""

    level: Literal["warning", "error"]
    first_seen: datetime  # when the group's first still-true condition arrived
    last_joined: datetime  # when a condition last joined the group
    last_notified: datetime | None
    firing: bool  # some condition in it is still true


def next_notification(group: PageGroup, timing: Timing = Timing()) -> datetime | None:
    """When the group is next sent to the page sinks; None when it never is again."""
    if not group.firing:
        return None
    if group.last_notified is None:
        return group.first_seen + timing.group_wait
    if group.level == "warning":
        return None  # a warning notifies once
    if group.last_joined > group.last_notified:
        return max(group.last_notified + timing.group_interval, group.last_joined)
    return group.last_notified + timing.repeat_interval


def events_firing(last_event_at: datetime | None, now: datetime, timing: Timing = Timing()) -> bool:
    """An error page with no condition keeps its group firing for one repeat interval after its
    newest event."""
    return last_event_at is not None and now - last_event_at < timing.repeat_interval


def due(group: PageGroup, now: datetime, timing: Timing = Timing()) -> bool:
    at = next_notification(group, timing)
    return at is not None and now >= at
