"""The alerts context's published language (seed 003 "Alerts"; DESIGN §3): the page every
service sends on `zimmer.alerts.cmd.page`, durably through its outbox."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import JsonObject, LongText, Name, ShortText, Time, Title
from zimmer_common.contracts.subjects import PAGE_SUBJECT

PAGE = PAGE_SUBJECT
Level = Literal["warning", "error"]
SNIPPET_MAX = 1200  # the snippet's bound (zimmer_common.snippet.MAX_CHARS)
# An issue carries its newest notifications only: a tracker refusing every event adds a row per
# event, and an issue must never outgrow one page of the list (issue 27 #13).
NOTIFICATIONS_SHOWN = 20
# The Health page's Alerts panel shows the newest this many issues ("N of the M issues shown are still
# paging"); the alerts service's gauge zimmer_alert_newest_issues counts the same ones (issue 32 #2).
PANEL_ISSUES = 10
# An id in a title splits one problem into as many issues as there are ids: ids go in context.
ID_IN_TITLE = re.compile(r"\d{5,}|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b", re.I)


def _stable_title(title: str) -> str:
    found = ID_IN_TITLE.search(title)
    if found:
        raise ValueError(f"the title must be stable: {found.group(0)!r} looks like an id; put ids in context")
    return title


class Page(Request):
    """One report of something a human must hear about. `fingerprint` decides grouping into an
    issue (the seed: message granularity decides grouping), so it names the kind of failure, never
    an instance. A repeating condition names itself in `condition_key` and says `still_true`
    each time it is checked; `still_true: false` resolves it."""

    title: Annotated[Title, Field(min_length=1), AfterValidator(_stable_title)]
    level: Level
    source: Name  # the service, or service/job
    fingerprint: list[ShortText] = Field(min_length=1, max_length=10)
    message: LongText
    context: JsonObject = Field(default_factory=dict)
    snippet: Annotated[str, Field(max_length=SNIPPET_MAX)] | None = None  # built and redacted by the sender
    condition_key: ShortText | None = None
    still_true: bool = True
    occurred_at: Time
    # The level the page's log record is written at, when lower than the page's own. The stranded
    # alert pages at error and logs at WARN (seed 000 "The page is not also an ERROR log record"):
    # an ERROR record is itself a repeating page, so one report would page twice.
    log_level: Level | None = None


class AlertQuery(Request):
    state: Literal["open", "notified", "all"] = "all"  # open: not yet notified
    source: Name | None = None
    level: Level | None = None
    since: Time | None = None
    limit: int = Field(default=50, ge=1, le=500)
    before: ShortText | None = Field(None, description="`next_before` of the page before: the issues seen "
                                                       "less recently than its last one")


class NotificationView(Payload):
    sink: str
    outcome: str  # sent, failed, not_allowed (the environment), not_configured
    detail: str
    attempts: int
    at: datetime
    group_title: str | None = None


class IssueView(Payload):
    id: int
    fingerprint: str
    title: str
    level: Level
    source: str
    events: int
    tracker_events: int = 0  # how many of them the issue tracker took (it gets every one)
    first_seen: datetime
    last_seen: datetime
    notified_at: datetime | None
    last_message: str
    last_snippet: str | None
    notifications: list[NotificationView]  # the newest NOTIFICATIONS_SHOWN, oldest first
    # Whether it still pages (issue 32 #6). With a condition (its newest event's): while the
    # condition is true, until a sender or an operator resolves it (`resolve_condition`). An error
    # with no condition: while its events keep arriving, until `firing_until` passes with none.
    condition_key: str | None = Field(None, description="The condition its newest event reported, if any: "
                                      "what POST /api/v1/alerts/conditions/{condition_key}/resolve takes")
    still_firing: bool = Field(False, description="Still paging: its condition is true, or (an error with no "
                               "condition) an event arrived within the repeat interval")
    firing_until: datetime | None = Field(None, description="An error with no condition: when it stops paging "
                                          "unless another event arrives")
    resolved_at: datetime | None = Field(None, description="With a condition: when it was resolved")
    notifications_not_shown: int = 0  # older notifications not carried (issue 27 #13: a row stays small)


class ConditionView(Payload):
    condition_key: str
    title: str
    level: Level
    source: str
    still_true: bool
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None


class AlertList(Payload):
    issues: list[IssueView]
    conditions: list[ConditionView]  # every condition still true, and those resolved in the window
    page_notifications: list[NotificationView]  # the repeating pages' notifications, newest first
    next_before: str | None = Field(None, description=(
        "Where the next page of issues starts: ask again with this as `before`. Null when this page reaches the "
        "end. A page ends before `limit` issues when they reach the byte bound of one answer, so the list never "
        "fails for its size"))


class ResolveCondition(Request):
    condition_key: ShortText = Field(min_length=1)


LIST_ALERTS = RpcSpec("alerts", "list_alerts", AlertQuery, AlertList)
RESOLVE_CONDITION = RpcSpec("alerts", "resolve_condition", ResolveCondition, ConditionView)
