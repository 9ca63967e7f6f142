"""The backlog's tables, declared once (seed 000, "What an item is"). The migrations build them;
these models are what every query is written against (SQLAlchemy Core), and a test checks that
the two agree column by column (tests/test_tables_match_migrations.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, BigInteger, Boolean, Double, ForeignKey, Integer, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlmodel import SQLModel

from zimmer_common.columns import TIMESTAMPTZ, col, identity

SCHEMA = "backlog"
ARGS = {"schema": SCHEMA}


class WorkBacklogItem(SQLModel, table=True):
    """A row is never deleted: queued → starting → started, or queued → removed."""

    __tablename__ = "work_backlog_items"
    __table_args__ = ARGS

    id: int | None = identity()
    key: str = col(Text)
    issue_url: str | None = col(Text, null=True)
    repo: str | None = col(Text, null=True)
    surface: str | None = col(Text, null=True)
    title: str = col(Text, default="''")
    kind: str | None = col(Text, null=True)
    scope_direction: str | None = col(Text, null=True)
    estimated_cost: str = col(Text)
    gate_verdict: str | None = col(Text, null=True)
    decided_at: datetime | None = col(TIMESTAMPTZ, null=True)
    added_at: datetime | None = col(TIMESTAMPTZ, default="now()")
    added_by: str | None = col(Text, null=True)
    added_via: str = col(Text)
    precedence: int = col(Integer)
    pinned: bool = col(Boolean, default="false")
    status: str = col(Text, default="'queued'")
    writing_session_id: int | None = col(BigInteger, null=True)
    started_session_id: int | None = col(BigInteger, null=True)
    started_by_session_id: int | None = col(BigInteger, null=True)
    started_at: datetime | None = col(TIMESTAMPTZ, null=True)
    # The spawn saga's request, kept so a recovery asks spot-gate exactly the same thing.
    spawn_key: str | None = col(Text, null=True)
    start_class: str | None = col(Text, null=True)
    start_precedence: int | None = col(Integer, null=True)
    start_deadline: float | None = col(Double, null=True)  # epoch seconds
    removed_at: datetime | None = col(TIMESTAMPTZ, null=True)
    removed_by: str | None = col(Text, null=True)
    removal_reason: str | None = col(Text, null=True)
    liveness_state: str | None = col(Text, null=True)
    liveness_checked_at: datetime | None = col(TIMESTAMPTZ, null=True)
    held_at: datetime | None = col(TIMESTAMPTZ, null=True)
    held_until: datetime | None = col(TIMESTAMPTZ, null=True)
    held_by: str | None = col(Text, null=True)
    held_by_session_id: int | None = col(BigInteger, null=True)
    hold_reason: str | None = col(Text, null=True)
    held_liveness_state: str | None = col(Text, null=True)
    payload: dict[str, Any] = col(JSONB, default="'{}'::jsonb")
    import_id: str | None = col(Text, null=True, unique=True)


class ProducedSession(SQLModel, table=True):
    """What spot-gate's session events say about the sessions this backlog produced."""

    __tablename__ = "produced_sessions"
    __table_args__ = ARGS

    session_id: int = col(BigInteger, primary_key=True, autoincrement=False)
    item_id: int = col(BigInteger, ForeignKey(f"{SCHEMA}.work_backlog_items.id"))
    status: str = col(Text)
    spot_held: bool = col(Boolean, default="false")
    updated_at: datetime | None = col(TIMESTAMPTZ, default="now()")
    version: int = col(BigInteger, default="-1")
    ended_at: datetime | None = col(TIMESTAMPTZ, null=True)  # archived or failed, as spot-gate said


class ImportRun(SQLModel, table=True):
    """One row per import run: what it read, what it wrote, and why it could not."""

    __tablename__ = "import_runs"
    __table_args__ = ARGS

    id: int | None = identity()
    source: str | None = col(Text, null=True)
    started_at: datetime | None = col(TIMESTAMPTZ, default="now()")
    finished_at: datetime | None = col(TIMESTAMPTZ, null=True)
    inserted: int = col(Integer, default="0")
    skipped: int = col(Integer, default="0")
    error: str | None = col(Text, null=True)


class AlertMark(SQLModel, table=True):
    """An expiring high-water mark: the band the stranded alert last paged for, or the probe key."""

    __tablename__ = "alert_marks"
    __table_args__ = ARGS

    name: str = col(Text, primary_key=True)
    weeks: int = col(Integer, default="0")
    row_band: int = col(Integer, default="0")
    token: str | None = col(Text, null=True)
    paged_at: datetime | None = col(TIMESTAMPTZ, null=True)
    expires_at: datetime = col(TIMESTAMPTZ)


class LivenessPass(SQLModel, table=True):
    """One liveness pass: what it examined, what it could not read, and what it paged."""

    __tablename__ = "liveness_passes"
    __table_args__ = ARGS

    id: int | None = identity()
    started_at: datetime = col(TIMESTAMPTZ)
    finished_at: datetime | None = col(TIMESTAMPTZ, null=True)
    examined: int = col(Integer, default="0")
    unknown: int = col(Integer, default="0")
    requests: int = col(Integer, default="0")
    unreadable_repos: list[str] = col(ARRAY(Text), default="'{}'")
    rate_limited: bool = col(Boolean, default="false")
    stranded: int | None = col(Integer, null=True)
    oldest_stranded_age_seconds: float | None = col(Double, null=True)
    paged: str | None = col(Text, null=True)


class GithubIssue(SQLModel, table=True):
    """What the snapshot job last saw of a gated repository's issue."""

    __tablename__ = "github_issues"
    __table_args__ = ARGS

    repo: str = col(Text, primary_key=True)  # owner/name, lower case
    number: int = col(Integer, primary_key=True, autoincrement=False)
    title: str = col(Text, default="''")
    state: str = col(Text)
    seen_at: datetime = col(TIMESTAMPTZ)


class GithubOpenIssueCount(SQLModel, table=True):
    """A gated repository's open-issue count at one snapshot (the Issues view's trend chart)."""

    __tablename__ = "github_open_issue_counts"
    __table_args__ = ARGS

    repo: str = col(Text, primary_key=True)
    taken_at: datetime = col(TIMESTAMPTZ, primary_key=True)
    open_issues: int = col(Integer)
    complete: bool = col(Boolean)


class KeyMerge(SQLModel, table=True):
    """The ledger of migration 0007 (issue 27): each row whose key it re-spelled, and each duplicate
    open row of one issue it removed as superseded, beside the row it kept."""

    __tablename__ = "key_merges"
    __table_args__ = ARGS

    id: int | None = identity()
    item_id: int = col(BigInteger, ForeignKey(f"{SCHEMA}.work_backlog_items.id"))
    action: str = col(Text)  # superseded, rekeyed or kept_spelling
    old_key: str = col(Text)
    new_key: str = col(Text)
    kept_item_id: int | None = col(BigInteger, ForeignKey(f"{SCHEMA}.work_backlog_items.id"), null=True)
    merged_at: datetime | None = col(TIMESTAMPTZ, default="now()")


items = WorkBacklogItem.__table__
produced = ProducedSession.__table__
import_runs = ImportRun.__table__
alert_marks = AlertMark.__table__
liveness_passes = LivenessPass.__table__
github_issues = GithubIssue.__table__
github_open_issue_counts = GithubOpenIssueCount.__table__
key_merges = KeyMerge.__table__
