-- The disk sweeps' records (seed 003 "A deleted session takes its directories with it" through
-- "Counting mangled clones"; issue 16). One sweeper runs beside each runtime host's disk, and
-- every replica shares this schema, so each row says which host it is about: any sweeper can
-- answer the Health page's Disk and clones panel for every host.

-- Every run of every disk sweep: what it examined, removed, kept, refused or left for the next
-- tick, and the bytes it freed (measured against the volume).
CREATE TABLE sweeper.disk_runs (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host         text        NOT NULL,
    job          text        NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    outcome      text        NOT NULL CHECK (outcome IN ('ok', 'partial', 'aborted', 'failed')),
    counts       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    bytes_freed  bigint      NOT NULL DEFAULT 0,
    refusals     integer     NOT NULL DEFAULT 0,
    note         text        NOT NULL DEFAULT ''
);
CREATE INDEX disk_runs_newest ON sweeper.disk_runs (host, job, started_at DESC);

-- Each time the guard refused a deletion because a live or reap-protected session owns the path
-- (never routine: it means a snapshot went stale and the guard caught it; each one pages).
CREATE TABLE sweeper.disk_refusals (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host         text        NOT NULL,
    at           timestamptz NOT NULL,
    job          text        NOT NULL,
    path         text        NOT NULL,
    session_ids  bigint[]    NOT NULL DEFAULT '{}',
    reason       text        NOT NULL
);
CREATE INDEX disk_refusals_recent ON sweeper.disk_refusals (host, at DESC);

-- The newest reading of each root's volume, per host (the free-space monitor writes it).
CREATE TABLE sweeper.disk_roots (
    host         text        NOT NULL,
    name         text        NOT NULL CHECK (name IN ('clones', 'transcripts', 'scratch', 'attachments', 'artifacts', 'trash')),
    path         text,
    exists_now   boolean     NOT NULL,
    free_bytes   bigint,
    total_bytes  bigint,
    sweepable    boolean     NOT NULL,
    fence        text        NOT NULL,
    read_at      timestamptz NOT NULL,
    PRIMARY KEY (host, name)
);
