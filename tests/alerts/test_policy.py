"""Who may page and when a page is sent (issue 11), with a frozen clock: a lasting condition
pages at 30 s, again at 4 h, and stops when resolved; a warning pages once; a burst is one
notification; the page contract refuses ids in titles."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from zimmer_alerts.domain.policy import PageGroup, Timing, allowed_sinks, due, fingerprint, issue_notifies, next_notification
from zimmer_common.contracts.alerts import Page
from zimmer_common.settings import Environment

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.mark.parametrize(("env", "sinks"), [
    (Environment.PRODUCTION, {"log", "issue_tracker", "slack", "alertmanager"}),
    (Environment.STAGING, {"log", "issue_tracker"}),  # records issues, pages nobody
    (Environment.DEVELOPMENT, {"log"}),  # recorded locally only
    (Environment.TEST, {"log"}),
])
def test_who_may_page_is_decided_by_the_environment(env: Environment, sinks: set[str]) -> None:
    assert allowed_sinks(env) == sinks


def test_a_lasting_error_pages_at_30_seconds_then_every_4_hours_until_resolved() -> None:
    group = PageGroup(level="error", first_seen=T0, last_joined=T0, last_notified=None, firing=True)
    assert not due(group, T0 + 29 * S) and due(group, T0 + 30 * S)
    group = PageGroup(level="error", first_seen=T0, last_joined=T0, last_notified=T0 + 30 * S, firing=True)
    assert next_notification(group) == T0 + 30 * S + timedelta(hours=4)
    assert not due(group, T0 + timedelta(hours=4, seconds=29)) and due(group, T0 + timedelta(hours=4, seconds=30))
    resolved = PageGroup(level="error", first_seen=T0, last_joined=T0, last_notified=T0 + 30 * S, firing=False)
    assert next_notification(resolved) is None


def test_a_warning_pages_once() -> None:
    group = PageGroup(level="warning", first_seen=T0, last_joined=T0 + 60 * S, last_notified=T0 + 30 * S,
                      firing=True)
    assert next_notification(group) is None


def test_a_condition_joining_a_notified_group_goes_at_the_next_group_interval() -> None:
    group = PageGroup(level="error", first_seen=T0, last_joined=T0 + 60 * S, last_notified=T0 + 30 * S, firing=True)
    assert next_notification(group) == T0 + 30 * S + timedelta(minutes=5)


def test_issues_notify_once_and_a_burst_of_ids_is_one_issue() -> None:
    assert issue_notifies(False) and not issue_notifies(True)
    fingerprints = {fingerprint(["sweeper", "clone_reaper", "PermissionError"]) for _ in range(100)}
    assert len(fingerprints) == 1  # the ids of the 100 events are in context, not in the fingerprint
    assert fingerprint(["a", "b"]) != fingerprint(["b", "a"]) != fingerprint(["ab"])


@settings(max_examples=300)
@given(level=st.sampled_from(["warning", "error"]),
       joins=st.lists(st.integers(min_value=0, max_value=10 * 3600), max_size=8),
       checks=st.lists(st.integers(min_value=0, max_value=12 * 3600), min_size=1, max_size=200),
       resolve_at=st.one_of(st.none(), st.integers(min_value=0, max_value=12 * 3600)))
def test_sending_whenever_due_respects_every_interval(level: str, joins: list[int], checks: list[int],
                                                      resolve_at: int | None) -> None:
    """A job checking at arbitrary moments and sending whenever due never sends early, never sends
    twice inside a group interval, repeats no sooner than the repeat interval without a new join,
    sends a warning once, and sends nothing after the condition resolved."""
    timing = Timing()
    events = sorted({0, *joins})
    sent: list[datetime] = []
    for t in sorted(set(checks)):
        now = T0 + t * S
        joined = [T0 + j * S for j in events if T0 + j * S <= now]
        firing = resolve_at is None or t < resolve_at
        group = PageGroup(level=level, first_seen=T0, last_joined=joined[-1], last_notified=sent[-1] if sent else None,
                          firing=firing)  # type: ignore[arg-type]  # hypothesis draws the level from the literals
        if due(group, now, timing):
            sent.append(now)
    if sent:
        assert sent[0] >= T0 + timing.group_wait
    for a, b in itertools.pairwise(sent):
        assert b - a >= timing.group_interval
        if not any(a < T0 + j * S <= b for j in events):
            assert b - a >= timing.repeat_interval
    if level == "warning":
        assert len(sent) <= 1
    if resolve_at is not None:
        assert all(s < T0 + resolve_at * S for s in sent)


def page(**overrides: object) -> dict[str, object]:
    return {"title": "Clone reaper refused", "level": "error", "source": "sweeper", "fingerprint": ["clone_reaper"],
            "message": "refused to delete a clone", "occurred_at": T0.isoformat(), **overrides}


@pytest.mark.parametrize("title", ["Session 123456 failed", "Job 0f8fad5b-d9cb-469f-a165-70867728950e failed",
                                   "Clone deadbeef1234 refused"])
def test_a_title_with_an_id_is_refused(title: str) -> None:
    with pytest.raises(ValidationError, match="looks like an id"):
        Page.model_validate(page(title=title))


@pytest.mark.parametrize("title", ["HTTP 503 from GitHub", "Cron schedule stale", "Queue backlog critical",
                                   "Nothing is executing"])
def test_stable_titles_are_kept(title: str) -> None:
    assert Page.model_validate(page(title=title)).title == title


def test_the_page_contract_bounds() -> None:
    for bad in ({"snippet": "x" * 1201}, {"fingerprint": []}, {"fingerprint": ["a"] * 11}, {"level": "info"},
                {"title": ""}):
        with pytest.raises(ValidationError):
            Page.model_validate(page(**bad))
