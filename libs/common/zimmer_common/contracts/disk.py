"""The sweeper's disk surfaces (seed 003, "Clone pruning has a second, urgent gear" and the
Health page's "Disk and clones" panel): reclaiming space under pressure, the readings of the
roots and sweeps, and where the transcript archive keeps its zips.

`reclaim_space` takes a requirement, never a directory: the sweeper resolves its own clones base,
so no caller can point recursive deletion at a path that is not the clones root.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec

CTX = "sweeper"
RootName = Literal["clones", "transcripts", "scratch", "attachments", "artifacts", "trash"]
ROOT_NAMES: Final[tuple[RootName, ...]] = ("clones", "transcripts", "scratch", "attachments", "artifacts", "trash")
SweepOutcome = Literal["ok", "partial", "aborted", "failed"]

# JetStream object store (DESIGN §4: files served from any web replica): one zip per session and
# the rebuilt latest.zip holding every archived session's entry.
TRANSCRIPT_BUCKET: Final = "ZIMMER_TRANSCRIPTS"
LATEST_OBJECT: Final = "latest.zip"


def session_transcript_object(session_id: int) -> str:
    return f"sessions/{session_id}.zip"


class ReclaimSpace(Request):
    target_free_bytes: int = Field(ge=0, le=2**63 - 1, description="Free bytes the clones volume must reach")


class RemovedDirectory(Payload):
    path: str
    bytes: int  # measured against the volume (free space before and after), not summed per file
    mtime: datetime | None


class ReclaimReport(Payload):
    target_free_bytes: int
    free_before: int
    free_after: int
    reached: bool
    tombstones_reaped: int
    removed: list[RemovedDirectory]
    refused: list[str]  # the guard said a live or reap-protected session owns it
    failed: list[str]  # a removal raised: logged and skipped
    budget_exhausted: bool
    sentence: str


class DiskHealthQuery(Request):
    pass


class RootReading(Payload):
    name: RootName
    path: str | None  # None: not configured on this sweeper
    exists: bool
    free_bytes: int | None
    total_bytes: int | None
    sweepable: bool  # the fence: may this deployment delete under this root?
    fence: str  # the sentence saying why it may or may not


class SweepRunView(Payload):
    job: str
    started_at: datetime
    finished_at: datetime | None
    outcome: SweepOutcome
    counts: dict[str, int]  # what the run examined, removed, kept, refused, deferred, ...
    bytes_freed: int
    refusals: int
    note: str  # one sentence: what it did, or why it stopped


class HostDisk(Payload):
    """One runtime host's disk, as its sweeper last wrote it down."""

    host: str
    read_at: datetime | None  # the newest root reading; None: this host's sweeper never read its roots
    roots: list[RootReading]
    runs: list[SweepRunView]  # the newest run of each sweep on this host
    refusals_24h: int  # guard refusals in the last day (each one paged)
    pressure: Literal["ok", "reclaiming", "unreachable"]


class DiskHealth(Payload):
    """Every host's disk: any sweeper answers, from the schema all of them share."""

    status: Literal["ok", "warning", "critical"]
    hosts: list[HostDisk]
    lines: list[str]  # the prose get_system_health shows


DISK_HEALTH = RpcSpec(CTX, "disk_health", DiskHealthQuery, DiskHealth)


def reclaim_space_spec(host: str) -> RpcSpec[ReclaimSpace, ReclaimReport]:
    """Reclaiming is about one host's disk, so it is asked of that host's sweeper: the subject
    carries the host (`zimmer.sweeper.rpc.reclaim_space.<host>`)."""
    return RpcSpec(CTX, f"reclaim_space.{host}", ReclaimSpace, ReclaimReport)
