"""A backlog row's issue as GitHub last showed it (issue 27 #2): the `github` field of ItemView,
on the REST index, get_work_backlog and the Issues view alike. The backlog decides it; this is
only its shape."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload

GithubStateName = Literal["open", "closed", "open_pr", "merged_pr", "unknown"]


class IssueState(Payload):
    state: GithubStateName = Field(description=(
        "open; closed; open_pr (open, and an open pull request references it); merged_pr (open, and a merged "
        "pull request references it); unknown (no issue, not in the GitHub snapshot's repositories, or GitHub "
        "could not be read). The snapshot's closed wins over the liveness sweep's stored verdict"))
    read_at: datetime | None = Field(description=(
        "When the reading it comes from was taken: the snapshot last listed the issue open or first found it "
        "closed, or the liveness sweep checked it. Null when nothing read it"))
    read_by: Literal["snapshot", "liveness"] | None = Field(description=(
        "snapshot: the 10-minute listing of the gated repositories' open issues; liveness: the hourly sweep's "
        "stored verdict (rows that left the queue only)"))
    leaves_as: Literal["issue_closed", "issue_has_open_pr"] | None = Field(default=None, description=(
        "On a queued row: the removal reason this reading makes true, so the groomer's next pull should remove "
        "the row with it. Nothing removes a queued row by itself: the hourly liveness sweep reads only rows that "
        "left the queue"))
