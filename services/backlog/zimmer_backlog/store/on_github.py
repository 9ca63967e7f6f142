"""Every read of backlog rows joined to the GitHub snapshot (issue 27 #2): each row's issue as
GitHub last showed it comes with the row, in the same statement (one outer join on the snapshot's
primary key, never a query per row), and `domain.issue_state` decides what it reads.

The join uses its own alias of `github_issues`, so a row filter that asks the snapshot itself
(`snapshot.SHOWN_CLOSED`, an EXISTS over the table) still reads the table, not this join's row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Integer, and_, cast, func

from zimmer_backlog.domain.issue_state import IssueReadings, issue_state
from zimmer_backlog.store.tables import github_issues, items
from zimmer_common.contracts.issue_state import IssueState

# The repository and number an item's issue URL names, in SQL (the URL shape is a CHECK).
ISSUE_REPO = func.lower(func.substring(items.c.issue_url, r"^https://github\.com/([^/]+/[^/]+)/issues/"))
ISSUE_NUMBER = cast(func.substring(items.c.issue_url, r"/issues/([0-9]+)$"), Integer)

SNAPSHOT_OF_ITEM = github_issues.alias("issue_on_github")
JOIN_ON = and_(SNAPSHOT_OF_ITEM.c.repo == ISSUE_REPO, SNAPSHOT_OF_ITEM.c.number == ISSUE_NUMBER)
# Named apart from ItemView's fields, so a view built from the row never mistakes them for its own.
SNAPSHOT_STATE, SNAPSHOT_SEEN_AT = "github_snapshot_state", "github_snapshot_seen_at"
SNAPSHOT_COLUMNS = (SNAPSHOT_OF_ITEM.c.state.label(SNAPSHOT_STATE), SNAPSHOT_OF_ITEM.c.seen_at.label(SNAPSHOT_SEEN_AT))


def joined(from_clause: Any) -> Any:
    """`from_clause` (items, or items joined to their sessions) with each row's snapshot issue."""
    return from_clause.outerjoin(SNAPSHOT_OF_ITEM, JOIN_ON)


def state_of(row: Mapping[str, Any]) -> IssueState | None:
    """The `github` field of a row read with `SNAPSHOT_COLUMNS`; None for a row read without them
    (a write's RETURNING: that answer did not read GitHub, and saying "unknown" would claim it had)."""
    if SNAPSHOT_STATE not in row:
        return None
    found = issue_state(IssueReadings(
        has_issue=row["issue_url"] is not None, status=row["status"], snapshot_state=row[SNAPSHOT_STATE],
        snapshot_seen_at=row[SNAPSHOT_SEEN_AT], verdict=row["liveness_state"],
        verdict_checked_at=row["liveness_checked_at"]))
    return IssueState(state=found.state.value, read_at=found.read_at,
                      read_by=found.read_by.value if found.read_by else None, leaves_as=found.leaves_as)
