-- Session logs (seed 003 "Log retention"; DESIGN §9 "Logs retention storage"; issue 14).
--
-- Partitioned by level class (verbose / other), then by day of created_at: the time the sweeper
-- wrote the row, never the runtime's timestamp, so a late line can never land in a day already
-- dropped. Retention drops whole day partitions: its cost does not grow with the table, and it
-- leaves no dead rows behind for vacuum. The day partitions are created ahead by the
-- log_partitions job, never here: the migration runs on the boot path and the dates it would
-- need are relative to the day the job runs.
CREATE SEQUENCE sweeper.logs_id_seq AS bigint;

CREATE TABLE sweeper.logs (
    id           bigint      NOT NULL DEFAULT nextval('sweeper.logs_id_seq'),
    level_class  text        NOT NULL CHECK (level_class IN ('verbose', 'other')),
    created_at   timestamptz NOT NULL,
    session_id   bigint      NOT NULL,
    level        text        NOT NULL CHECK (level IN ('verbose', 'info', 'warning', 'error')),
    message      text        NOT NULL,
    logged_at    timestamptz NOT NULL,  -- the runtime's timestamp of the line
    message_id   text        NOT NULL,  -- the runtime's id of the line (the ingest envelope's id)
    CHECK ((level = 'verbose') = (level_class = 'verbose'))
) PARTITION BY LIST (level_class);

ALTER SEQUENCE sweeper.logs_id_seq OWNED BY sweeper.logs.id;

CREATE TABLE sweeper.logs_verbose PARTITION OF sweeper.logs FOR VALUES IN ('verbose') PARTITION BY RANGE (created_at);
CREATE TABLE sweeper.logs_other PARTITION OF sweeper.logs FOR VALUES IN ('other') PARTITION BY RANGE (created_at);

-- The session timeline, and deleting a session's rows; declared on the parent, so every day
-- partition gets its own copy when it is created.
CREATE INDEX logs_session_timeline ON sweeper.logs (session_id, created_at, id);

-- Which ingest messages are written, by stream sequence, in the same transaction as their rows:
-- a batch redelivered after a crash between commit and ack writes nothing twice. Rows at or
-- below the consumer's ack floor can never be redelivered, and are pruned.
CREATE TABLE sweeper.ingest_ledger (
    consumer    text   NOT NULL,
    stream_seq  bigint NOT NULL,
    PRIMARY KEY (consumer, stream_seq)
);

-- A deleted session's rows go with it: one row per session still to purge, worked off in
-- bounded slices by the consumer and then by each retention tick.
CREATE TABLE sweeper.log_purges (
    session_id    bigint      PRIMARY KEY,
    reason        text        NOT NULL,
    requested_at  timestamptz NOT NULL,
    deleted_rows  bigint      NOT NULL DEFAULT 0,
    finished_at   timestamptz
);

-- One row per retention tick: "is retention running?" without a shell.
CREATE TABLE sweeper.retention_runs (
    id                bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at        timestamptz NOT NULL,
    finished_at       timestamptz NOT NULL,
    dropped           integer     NOT NULL,
    failed            integer     NOT NULL,
    purged_rows       bigint      NOT NULL,
    budget_exhausted  boolean     NOT NULL,
    detail            jsonb       NOT NULL DEFAULT '{}'::jsonb
);
