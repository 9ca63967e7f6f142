-- The trash pipeline (seed 003 "The clone cleanup's own git commands are bounded too" through
-- "Counting mangled clones without paging for each one"; issue 16): one record per archived
-- session on the host whose disk holds its clone, and the markers the mass-deletion guard leaves.
-- Every replica of every host's sweeper shares this schema, so each row names its host.

-- An archived session's way through the trash. The session_archived consumer writes it (and only
-- that: the work is the deferred_clone_cleanup job's), with trash_after stamped at once: the
-- reversible window starts at the archive, and nothing but this pipeline reaps inside it.
--   pending    the cleanup is to do (again after next_attempt_at, MAX_ATTEMPTS 5, RETRY_WAIT 30 s)
--   held       git timed out (or the clone is no git repository): the clone is kept until trash_after
--   trashed    the clone is gone; what was preserved (and scratch, attachments) waits for trash_after
--   done       the clone is gone and nothing restorable was left: trash_after cleared
--   exhausted  five attempts failed (paged once): the clone waits for EmptyTrash or the stale reap
--   cancelled  the session was live again before its clone was reaped
--   restoring  unarchived: the restore from what was preserved is to do (or to be reported)
--   restored   the restore finished and spot-gate was told (restore_outcome says how it went)
--   emptied    EmptyTrash took everything after the deadline
--   kept       at the deadline the session was reap-protected: its directories are not trash
CREATE TABLE sweeper.trash_records (
    session_id        bigint      PRIMARY KEY,
    host              text        NOT NULL,
    clone_path        text,
    -- NULL only on a record an unarchive made: this sweeper never saw that session's archive.
    archived_at       timestamptz,
    -- The session event's version: a redelivered or overtaken archive never rewinds a newer one.
    session_version   bigint      NOT NULL DEFAULT 0,
    state             text        NOT NULL CHECK (state IN ('pending', 'held', 'trashed', 'done', 'exhausted',
                                      'cancelled', 'restoring', 'restored', 'emptied', 'kept')),
    attempts          integer     NOT NULL DEFAULT 0,
    next_attempt_at   timestamptz NOT NULL,
    trash_after       timestamptz,
    -- What the dirty check found: a timeout reads `unknown`, which is preserved like `dirty`.
    finding           text        CHECK (finding IN ('clean', 'dirty', 'unknown', 'mangled', 'absent',
                                      'not_a_repository')),
    artifacts_path    text,
    bundle_preserved  boolean     NOT NULL DEFAULT false,
    patch_preserved   boolean     NOT NULL DEFAULT false,
    preserved_bytes   bigint      NOT NULL DEFAULT 0,
    -- The guard removed the clone in this cycle: a directory at the path on unarchive is then
    -- someone else's rebuild, not the clone this sweeper kept.
    clone_removed     boolean     NOT NULL DEFAULT false,
    freed_bytes       bigint      NOT NULL DEFAULT 0,
    outcome           text        NOT NULL DEFAULT '',
    last_error        text        NOT NULL DEFAULT '',
    recorded_at       timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    unarchived_at     timestamptz,
    restore_outcome   text        CHECK (restore_outcome IN ('restored', 'nothing_preserved', 'failed')),
    restore_detail    text        NOT NULL DEFAULT ''
);
CREATE INDEX trash_records_due ON sweeper.trash_records (host, next_attempt_at)
    WHERE state IN ('pending', 'restoring');
CREATE INDEX trash_records_deadline ON sweeper.trash_records (host, trash_after)
    WHERE trash_after IS NOT NULL;

-- A clone the archive-side guard defused: a working tree of nothing but deletions of tracked files
-- was not preserved (the bundle still travelled). One per archive of a session, so a retried
-- cleanup never counts one twice; the daily report counts them by defused_at.
CREATE TABLE sweeper.mangled_clone_markers (
    session_id         bigint      NOT NULL,
    archived_at        timestamptz NOT NULL,
    host               text        NOT NULL,
    dropped_deletions  integer     NOT NULL CHECK (dropped_deletions > 0),
    defused_at         timestamptz NOT NULL,
    PRIMARY KEY (session_id, archived_at)
);
CREATE INDEX mangled_clone_markers_recent ON sweeper.mangled_clone_markers (host, defused_at);
