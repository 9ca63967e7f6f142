-- The transcript archive (seed 003's TranscriptArchiveJob; issue 16): every session's transcript
-- directories zipped into the JetStream object store (bucket ZIMMER_TRANSCRIPTS, object
-- sessions/<id>.zip), so any gateway replica serves GET /api/v1/sessions/{id}/transcript.zip.

-- The checkpoint: which change of each session's transcript is in the bucket. A session is due
-- again once its updated_at passes `session_updated_at`, or the newest file in its transcript
-- directories (subagent transcripts included) passes `newest_mtime`: each compared with its own
-- clock (spot-gate's database, this host's filesystem), never one against the other. Written right
-- after each session's object is stored, so a run that stops early keeps the slice it finished.
CREATE TABLE sweeper.transcript_archives (
    session_id   bigint      PRIMARY KEY,
    host         text        NOT NULL,
    session_updated_at timestamptz NOT NULL,
    newest_mtime timestamptz NOT NULL,
    archived_at  timestamptz NOT NULL,
    object_name  text        NOT NULL,
    bytes        bigint      NOT NULL,
    files        integer     NOT NULL,
    directories  text[]      NOT NULL DEFAULT '{}',
    digest       text        NOT NULL
);

-- latest.zip, the bucket's every session zip in one: what it was built from (a fingerprint of the
-- checkpoints), so any host rebuilds it when, and only when, that changed.
CREATE TABLE sweeper.transcript_archive_latest (
    object_name  text        PRIMARY KEY,
    fingerprint  text        NOT NULL,
    built_at     timestamptz NOT NULL,
    built_by     text        NOT NULL,
    entries      integer     NOT NULL,
    bytes        bigint      NOT NULL
);
