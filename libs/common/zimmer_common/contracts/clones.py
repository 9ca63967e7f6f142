"""What spot-gate knows about sessions' directories, and what the sweeper asks it (seed 003, "A
deleted session takes its directories with it" through "Counting mangled clones"; DESIGN §9
"Where the sweeper runs").

The sweeper runs beside the disk it sweeps and knows sessions only by asking spot-gate, the
system of record. Every question here decides deletions, so spot-gate answers them unscoped
(every row, whatever its status) and the sweeper fails closed when no answer comes.

- The runtime reports each working directory it makes on `zimmer.ingest.clone` (`CloneReport`):
  spot-gate stores it on the session (`clone_path`, the agent root subdirectory, whether a fork's
  clone was scaffolded empty on purpose).
- `clone_ownership`: for a batch of expanded paths or bare basenames, which sessions track each
  (any status: the orphan sweeps' "tracked-path check") and which of those are live or
  reap-protected (the guard's question at the instant of deletion).
- `sessions_exist`: "which of these ids exist?", never "list every id" (the scratch and
  attachment orphan sweep), and whether the sessions table is empty (that sweep then aborts).
- `session_clones`: sessions with a clone path, paged by id (live ones for the integrity check;
  all of them for the transcript archive and the transcript classification).
- `record_session_warning`: the durable warning a refused reap leaves on the session, written
  through spot-gate's API, never its tables.
- `unarchive_restored`: the sweeper finished restoring an unarchived session's clone from what it
  preserved; spot-gate drops the session's `unarchive_started_at` stamp.
- `delete_session`: an operator's DELETE; the row goes and `session_deleted` announces it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints

from zimmer_common.contracts.envelope import Payload, Request, RpcSpec
from zimmer_common.contracts.fields import LongText, Name, RowId, ShortText, Time
from zimmer_common.contracts.runtime import SessionStatusName
from zimmer_common.contracts.spot import SessionRef
from zimmer_common.contracts.subjects import HOST_PATTERN, ingest_subject

CTX = "spot"
INGEST_CLONE = ingest_subject("clone")

# An unarchive stamped this recently protects the session's directories whatever its status says
# (seed 003 "The unarchive window, which no status check could see": UNARCHIVE_GRACE_PERIOD).
UNARCHIVE_GRACE: Final = timedelta(minutes=30)
LIVE_STATUSES: Final = ("waiting", "running", "needs_input")
OWNERSHIP_BATCH_MAX: Final = 500
IDS_BATCH_MAX: Final = 1_000
PATH_MAX: Final = 4_096  # PATH_MAX on Linux

Path = Annotated[str, StringConstraints(min_length=1, max_length=PATH_MAX)]


class CloneReport(Request):
    """The runtime made (or re-made, after an unarchive or a lost tree) a session's clone."""

    session_id: RowId
    clone_path: Path = Field(description="The clone's absolute path, as the runtime expanded it")
    agent_subdirectory: ShortText | None = Field(
        default=None, description="The agent root inside the clone: the agent's cwd is <clone>/<subdirectory>")
    scaffolded: bool = Field(default=False, description="A fork's clone scaffolded empty on purpose (no git tree)")
    host: Annotated[str, StringConstraints(pattern=HOST_PATTERN)] | None = Field(
        default=None, description="The runtime host whose disk holds the clone (its sweeper reaps it)")
    at: Time | None = None


class CloneOwnershipQuery(Request):
    paths: list[Path] = Field(min_length=1, max_length=OWNERSHIP_BATCH_MAX,
                              description="Expanded absolute paths, or bare basenames")


class CloneOwnership(Payload):
    path: str  # as asked
    basename: str
    tracked_by: list[int]  # every session whose clone_path is this path or has this basename, any status
    protected_by: list[int]  # those of them live (waiting, running, needs_input) or reap-protected
    # Matched by basename while the stored clone_path is another path (clone_path canonicalization
    # drift, seed #671): harmless, logged at WARN by the sweeper.
    drift: list[int]


class CloneOwnershipAnswer(Payload):
    answers: list[CloneOwnership]


class SessionIdsQuery(Request):
    ids: list[RowId] = Field(max_length=IDS_BATCH_MAX)


class SessionIdsAnswer(Payload):
    existing: list[int]  # of the ids asked, those with a row (any status)
    protected: list[int]  # of those, live or reap-protected
    any_sessions: bool  # False: the sessions table is empty, and a sweep deciding deletions aborts


class SessionClonesQuery(Request):
    scope: Literal["live", "all"] = "live"  # live: waiting, running, needs_input, or reap-protected
    host: Annotated[str, StringConstraints(pattern=HOST_PATTERN)] | None = None  # only clones on this host
    after_id: int = Field(default=0, ge=0)
    limit: int = Field(default=500, ge=1, le=1_000)


class SessionClone(Payload):
    session_id: int
    status: SessionStatusName
    clone_path: str
    agent_subdirectory: str | None
    scaffolded: bool
    host: str | None
    reap_protected: bool  # live, or an unarchive stamped within UNARCHIVE_GRACE
    updated_at: datetime


class SessionClonesPage(Payload):
    clones: list[SessionClone]
    next_after_id: int | None  # None: this was the last page


class SessionWarningIn(Request):
    session_id: RowId
    kind: Name  # e.g. clone_reap_refused
    message: LongText
    source: Name  # who leaves it, e.g. sweeper/orphan_clone_sweep


class SessionWarning(Payload):
    id: int
    session_id: int
    kind: str
    message: str
    source: str
    created_at: datetime


class UnarchiveRestored(Request):
    session_id: RowId
    outcome: Literal["restored", "nothing_preserved", "failed"]
    detail: LongText = ""


class StampCleared(Payload):
    session_id: int
    cleared: bool  # False: there was no stamp (it had lapsed, or was never set)


class SessionDeletion(Payload):
    session_id: int
    deleted_at: datetime
    stopped_turn: bool  # the session was running: a stop_turn (halt) went to the runtime


CLONE_OWNERSHIP = RpcSpec(CTX, "clone_ownership", CloneOwnershipQuery, CloneOwnershipAnswer)
SESSIONS_EXIST = RpcSpec(CTX, "sessions_exist", SessionIdsQuery, SessionIdsAnswer)
SESSION_CLONES = RpcSpec(CTX, "session_clones", SessionClonesQuery, SessionClonesPage)
RECORD_SESSION_WARNING = RpcSpec(CTX, "record_session_warning", SessionWarningIn, SessionWarning)
UNARCHIVE_RESTORED = RpcSpec(CTX, "unarchive_restored", UnarchiveRestored, StampCleared)
DELETE_SESSION = RpcSpec(CTX, "delete_session", SessionRef, SessionDeletion)
