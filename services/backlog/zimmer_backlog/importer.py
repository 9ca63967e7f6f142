"""The one-time import of WORK_BACKLOG.json into work_backlog_items (seed 000, "The import").

Inserts only, keyed on each item's id (`import_id`) in any status, so a second pass writes nothing;
never edits or deletes a row or touches the source; precedences verbatim, no re-rank. Every run
leaves a row in `backlog.import_runs`; an unreadable source fails loudly only in production.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import exists, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from zimmer_backlog.domain.issues import issue_rule_violation
from zimmer_backlog.handlers.github import DEFAULT_API_URL as DEFAULT_GITHUB_API_URL
from zimmer_backlog.handlers.github import GithubClient, GithubUnavailable
from zimmer_backlog.store import queue
from zimmer_backlog.store.tables import import_runs, items
from zimmer_common.contracts.backlog import Cost, canonical_key
from zimmer_common.contracts.fields import payload_too_large
from zimmer_common.logs import kv
from zimmer_common.settings import Environment, Settings

log = logging.getLogger("zimmer.backlog.import")

SOURCE_PATH_VAR = "WORK_BACKLOG_SOURCE_PATH"
GITHUB_TIMEOUT_SECONDS = 10.0
IMPORT_LOCK = "zimmer.backlog.import"
INT4_MAX = 2**31 - 1
REMOVED_WITHOUT_REASON = "removed before the import (no reason in WORK_BACKLOG.json)"
SkipReason = Literal["invalid", "duplicate_in_source", "already_imported", "open_row_for_key", "rejected"]
Progress = Callable[[int, int], None]


class ImportSourceUnavailable(RuntimeError):
    """The source could not be reached, read or parsed. Raised only in production."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"work backlog source {source} is unavailable: {reason}")
        self.source = source
        self.reason = reason


@dataclass(frozen=True)
class FileSource:
    path: Path

    def describe(self) -> str:
        return f"file:{self.path}"

    async def read(self) -> bytes:
        try:
            return await asyncio.to_thread(self.path.read_bytes)
        except OSError as exc:
            raise ImportSourceUnavailable(self.describe(), f"{type(exc).__name__}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class GithubSource:
    """`GET {api_url}/repos/{repo}/contents/{path}?ref={ref}`, the raw file, with a bearer token."""

    repo: str  # owner/repo
    token: str = field(default="", repr=False)
    api_url: str = DEFAULT_GITHUB_API_URL
    path: str = "WORK_BACKLOG.json"
    ref: str = "main"
    timeout: float = GITHUB_TIMEOUT_SECONDS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GithubSource | None:
        """None when WORK_BACKLOG_GITHUB_REPO is unset: GitHub is then not a configured source."""
        env = os.environ if environ is None else environ
        repo = env.get("WORK_BACKLOG_GITHUB_REPO", "").strip()
        if not repo:
            return None
        return cls(repo=repo, token=env.get("ZIMMER_GITHUB_TOKEN", "").strip(),
                   api_url=env.get("ZIMMER_GITHUB_API_URL", "").strip() or DEFAULT_GITHUB_API_URL,
                   path=env.get("WORK_BACKLOG_GITHUB_PATH", "").strip() or "WORK_BACKLOG.json",
                   ref=env.get("WORK_BACKLOG_GITHUB_REF", "").strip() or "main")

    @property
    def url(self) -> str:
        return f"{self.api_url.rstrip('/')}/repos/{self.repo}/contents/{quote(self.path.lstrip('/'), safe='/')}"

    def describe(self) -> str:
        return f"github:{self.repo}/{self.path.lstrip('/')}@{self.ref}"

    async def read(self) -> bytes:
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo):
            raise ImportSourceUnavailable(self.describe(), "WORK_BACKLOG_GITHUB_REPO must be owner/repo")
        client = GithubClient(self.api_url, self.token, timeout=self.timeout, total_timeout=self.timeout * 3)
        try:
            return await client.contents(self.repo, quote(self.path.lstrip("/"), safe="/"), self.ref)
        except GithubUnavailable as exc:
            raise ImportSourceUnavailable(self.describe(), f"{exc.detail} ({self.url})") from exc


@dataclass(frozen=True)
class NoSource:
    def describe(self) -> str:
        return "none"

    async def read(self) -> bytes:
        raise ImportSourceUnavailable("none", f"no path given, {SOURCE_PATH_VAR} is unset and "
                                      "WORK_BACKLOG_GITHUB_REPO is unset")


ImportSource = FileSource | GithubSource | NoSource
_FROM_ENV: Any = object()


def resolve_source(path: str | os.PathLike[str] | None = None, env_var: str | None = _FROM_ENV,
                   github: GithubSource | None = _FROM_ENV) -> ImportSource:
    """An explicit path, then WORK_BACKLOG_SOURCE_PATH, then GitHub. `env_var` and `github` are
    read from the environment unless passed (pass None to say "not configured")."""
    if env_var is _FROM_ENV:
        env_var = os.environ.get(SOURCE_PATH_VAR)
    if github is _FROM_ENV:
        github = GithubSource.from_env()
    for candidate in (path, env_var):
        if candidate is not None and str(candidate).strip():
            return FileSource(Path(candidate).expanduser().absolute())
    return github or NoSource()


class ImportItem(BaseModel):
    """One WORK_BACKLOG.json item. Unknown fields (prompt, notes, ratings, ...) go to payload."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)

    id: str = Field(min_length=1)
    key: str = Field(min_length=1)
    issue_url: str | None = None
    repo: str | None = None
    surface: str | None = None
    title: str = ""
    kind: str | None = None
    scope_direction: str | None = None
    estimated_cost: Cost
    gate_verdict: str | None = None
    decided_at: datetime | None = None
    added_at: datetime | None = None
    added_by: str | None = None
    precedence: int = Field(ge=-INT4_MAX - 1, le=INT4_MAX)
    pinned: bool = False
    status: Literal["queued", "started", "removed"] = "queued"
    started_at: datetime | None = None
    removed_at: datetime | None = None
    removed_by: str | None = None
    removal_reason: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _issue_rules(self) -> ImportItem:
        # A queued item may start a session, so it meets every rule; history rows (started,
        # removed) keep the spelling of their day, the issue rules that were always enforced.
        bad = issue_rule_violation(self.key, self.issue_url, "import", {**self.payload, **(self.model_extra or {})},
                                   will_start=self.status == "queued")
        if bad is not None:
            raise ValueError(f"{'.'.join(bad[0])}: {bad[1]}")
        self.key = canonical_key(self.key)
        return self

    @model_validator(mode="after")
    def _payload_bounded(self) -> ImportItem:
        # The bound an append meets (issue 27 #13), on the payload the row will store: the
        # source's payload with its unknown fields folded in.
        why = payload_too_large({**self.payload, **(self.model_extra or {})})
        if why is not None:
            raise ValueError(f"payload: {why}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _null_means_default(cls, data: Any) -> Any:
        nullable = ("title", "pinned", "status", "payload")
        return {k: v for k, v in data.items() if v is not None or k not in nullable} if isinstance(data, dict) else data

    def row(self) -> dict[str, Any]:
        columns = self.model_dump(exclude={"id", "payload"} | set(self.model_extra or {}))
        if self.status == "removed" and not self.removal_reason:
            columns["removal_reason"] = REMOVED_WITHOUT_REASON  # the table requires one
        if columns["added_at"] is None:
            del columns["added_at"]  # the table's default: now
        return {**columns, "import_id": self.id, "payload": {**self.payload, **(self.model_extra or {})}}


def parse_items(raw: bytes) -> list[Any]:
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return list(doc["items"])
    if isinstance(doc, list):
        return doc
    raise ValueError('expected a JSON object {"items": [...]} or a JSON list of items')


@dataclass(frozen=True)
class SkippedItem:
    id: str
    reason: SkipReason
    detail: str


@dataclass
class ImportReport:
    source: str
    run_id: int
    total: int = 0
    inserted: int = 0
    skipped: list[SkippedItem] = field(default_factory=list)
    error: str | None = None  # set when nothing could be imported; also on the ledger row
    source_unavailable: bool = False

    def skipped_for(self, reason: SkipReason) -> list[SkippedItem]:
        return [s for s in self.skipped if s.reason == reason]


def _insert(row: dict[str, Any]) -> Any:
    """One imported row, verbatim (precedence included); a second run of the same source inserts nothing."""
    return (insert(items).values(**row, added_via="import").on_conflict_do_nothing(index_elements=[items.c.import_id])
            .returning(items.c.id))


async def import_backlog(engine: AsyncEngine, *, source: ImportSource, env: Environment,
                         progress: Progress | None = None) -> ImportReport:
    described = source.describe()
    async with engine.begin() as conn:
        run_id = (await conn.execute(insert(import_runs).values(source=described).returning(import_runs.c.id))
                  ).scalar_one()
    report = ImportReport(source=described, run_id=int(run_id))
    try:
        raw = await source.read()
        try:
            entries = parse_items(raw)
        except ValueError as exc:
            raise ImportSourceUnavailable(described, f"unreadable: {exc}") from None
    except ImportSourceUnavailable as exc:
        report.error, report.source_unavailable = str(exc), True
        await _finish_run(engine, report)
        fields = {"source": described, "run_id": report.run_id, "env": env.value, "error": report.error}
        if env is Environment.PRODUCTION:
            # A warning here: it is raised to the start-up task, which pages "Work backlog import failed".
            log.warning("work backlog import: source unavailable", extra={"fields": fields})
            raise
        log.warning("work backlog import: source unavailable; recorded and skipped", extra={"fields": fields})
        return report
    report.total = len(entries)
    try:
        report.inserted, report.skipped = await _insert_all(engine, entries, progress)
    except Exception as exc:  # the batch in hand rolled back; earlier batches stay (insert-only, keyed)
        report.error = f"import failed: {type(exc).__name__}: {exc}"
        try:
            await _finish_run(engine, report)
        except Exception:  # noqa: BLE001 - the original error is the one to raise (and it pages)
            log.warning("work backlog import: could not record the failure", exc_info=True)
        raise
    await _finish_run(engine, report)
    noteworthy = [f"{s.id}: {s.reason}: {s.detail}" for s in report.skipped if s.reason != "already_imported"]
    (log.warning if noteworthy else log.info)("work backlog imported", extra={"fields": {
        "source": described, "run_id": report.run_id, "inserted": report.inserted,
        "skipped": len(report.skipped), "not_imported": noteworthy}})
    return report


IMPORT_BATCH = 200  # items per transaction: the ranking lock is released between batches


async def _insert_all(engine: AsyncEngine, entries: list[Any],
                      progress: Progress | None) -> tuple[int, list[SkippedItem]]:
    """Insert in batches of `IMPORT_BATCH`, each a transaction of its own under the ranking lock,
    so appends wait for one batch, never for the whole import (issue 9 #11). The import is
    insert-only and keyed on import_id, so a run that stops between batches is finished by the
    next run without doubling anything."""
    total, inserted, skipped = len(entries), 0, []
    if progress:
        progress(0, total)
    seen: set[str] = set()
    for start in range(0, total, IMPORT_BATCH):
        batch = entries[start:start + IMPORT_BATCH]
        n_inserted, n_skipped = await _insert_batch(engine, batch, start, seen)
        inserted += n_inserted
        skipped += n_skipped
        if progress:
            progress(start + len(batch), total)
    return inserted, skipped


async def _insert_batch(engine: AsyncEngine, entries: list[Any], offset: int,
                        seen: set[str]) -> tuple[int, list[SkippedItem]]:
    inserted, skipped = 0, []
    async with engine.begin() as conn:
        await queue.lock_ranking(conn)  # serialise with appenders: the one-open-row-per-key check holds
        ids = [str(e["id"]) for e in entries if isinstance(e, dict) and e.get("id") is not None]
        keys = [canonical_key(str(e["key"])) for e in entries if isinstance(e, dict) and e.get("key") is not None]
        imported = set((await conn.execute(select(items.c.import_id).where(items.c.import_id.in_(ids)))).scalars())
        open_keys = set((await conn.execute(select(items.c.key).where(items.c.key.in_(keys), queue.OPEN))).scalars())
        for n, entry in enumerate(entries, offset + 1):
            label = str(entry.get("id")) if isinstance(entry, dict) and entry.get("id") is not None else f"#{n}"
            skip = None
            try:
                item = ImportItem.model_validate(entry)
            except ValidationError as exc:
                skip = SkippedItem(label, "invalid", "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors()))
            else:
                if item.id in seen:
                    skip = SkippedItem(item.id, "duplicate_in_source", "an earlier item in the source has this id")
                elif item.id in imported:
                    skip = SkippedItem(item.id, "already_imported", "a row with this import_id exists")
                elif item.status == "queued" and item.key in open_keys:
                    skip = SkippedItem(item.id, "open_row_for_key", f"{item.key} already has a queued row")
                seen.add(item.id)
            if skip is None:
                try:
                    async with conn.begin_nested():
                        row = (await conn.execute(_insert(item.row()))).first()
                except DBAPIError as exc:
                    skip = SkippedItem(item.id, "rejected", str(exc.orig).splitlines()[-1])
                else:
                    if row is None:  # another importer got there first
                        skip = SkippedItem(item.id, "already_imported", "a row with this import_id exists")
                    else:
                        inserted += 1
                        if item.status == "queued":
                            open_keys.add(item.key)
            if skip is not None:
                skipped.append(skip)
    return inserted, skipped


async def _finish_run(engine: AsyncEngine, report: ImportReport) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(import_runs).where(import_runs.c.id == report.run_id).values(
            finished_at=func.now(), inserted=report.inserted, skipped=len(report.skipped), error=report.error))


async def import_once_at_start(engine: AsyncEngine, settings: Settings) -> ImportReport | None:
    """The one-time start-up task: import unless a run has already finished without error, so a
    restart reads neither the file nor GitHub again. Replicas starting together queue on an
    advisory lock and the later ones find the finished run. Raises ImportSourceUnavailable in
    production when the source cannot be read (after recording the run). With no source
    configured there is nothing to import: not an error, nothing recorded, nothing paged (a
    deployment that keeps its backlog only in Zimmer sets neither variable)."""
    source = resolve_source(None)
    if isinstance(source, NoSource):
        log.info("no work backlog import source configured; nothing to import at start",
                 extra=kv(variables=[SOURCE_PATH_VAR, "WORK_BACKLOG_GITHUB_REPO"]))
        return None
    async with engine.connect() as conn:
        await conn.execute(text("SELECT pg_advisory_lock(hashtext(:k))"), {"k": IMPORT_LOCK})
        await conn.commit()
        try:
            done = (await conn.execute(select(exists().where(
                import_runs.c.finished_at.is_not(None), import_runs.c.error.is_(None))))).scalar_one()
            await conn.commit()
            if done:
                return None
            return await import_backlog(engine, source=source, env=settings.env)
        finally:
            await conn.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": IMPORT_LOCK})
            await conn.commit()
