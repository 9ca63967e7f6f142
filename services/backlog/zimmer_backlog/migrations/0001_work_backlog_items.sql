-- The work backlog (seed 000, "What an item is"). A row is never deleted: status moves
-- queued → started or queued → removed and never back ("starting" is the spawn saga's
-- in-between state, DESIGN §5). Every column of the seed exists from the start, including those
-- the liveness sweep, holds and the Issues view fill in later.
CREATE TABLE backlog.work_backlog_items (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key                    text        NOT NULL,
    issue_url              text,
    repo                   text,
    surface                text,
    title                  text        NOT NULL DEFAULT '',
    kind                   text,
    scope_direction        text,
    estimated_cost         text        NOT NULL CHECK (estimated_cost IN ('small', 'medium', 'large')),
    gate_verdict           text,
    decided_at             timestamptz,
    added_at               timestamptz NOT NULL DEFAULT now(),
    added_by               text,
    added_via              text        NOT NULL CHECK (added_via IN ('rest', 'mcp', 'operator', 'import')),
    precedence             integer     NOT NULL,
    pinned                 boolean     NOT NULL DEFAULT false,
    status                 text        NOT NULL DEFAULT 'queued'
                                       CHECK (status IN ('queued', 'starting', 'started', 'removed')),
    writing_session_id     bigint,
    started_session_id     bigint,
    started_by_session_id  bigint,
    started_at             timestamptz,
    -- The spawn saga's request, kept so a recovery asks spot-gate exactly the same thing.
    spawn_key              text,
    start_class            text CHECK (start_class IN ('priority', 'spot')),
    start_precedence       integer,
    removed_at             timestamptz,
    removed_by             text,
    removal_reason         text,
    liveness_state         text,
    liveness_checked_at    timestamptz,
    held_at                timestamptz,
    held_until             timestamptz,
    held_by                text,
    held_by_session_id     bigint,
    hold_reason            text,
    held_liveness_state    text,
    payload                jsonb       NOT NULL DEFAULT '{}'::jsonb,
    import_id              text UNIQUE,
    -- An issueless item is exactly the shape ungated work would take: only a human or the import.
    CONSTRAINT issueless_only_from_a_human_or_the_import
        CHECK (issue_url IS NOT NULL OR added_via IN ('operator', 'import')),
    CONSTRAINT removal_has_a_reason CHECK (status <> 'removed' OR removal_reason IS NOT NULL)
);
-- One queued (or starting) row per key; a started row stays as history beside a fresh one.
CREATE UNIQUE INDEX work_backlog_one_open_row_per_key ON backlog.work_backlog_items (key)
    WHERE status IN ('queued', 'starting');
CREATE INDEX work_backlog_queue ON backlog.work_backlog_items (precedence DESC, added_at, id) WHERE status = 'queued';
CREATE INDEX work_backlog_started_session ON backlog.work_backlog_items (started_session_id);

-- What spot-gate's session events say about the sessions this backlog produced.
CREATE TABLE backlog.produced_sessions (
    session_id      bigint PRIMARY KEY,
    item_id         bigint      NOT NULL REFERENCES backlog.work_backlog_items (id),
    status          text        NOT NULL,
    spot_held       boolean     NOT NULL DEFAULT false,  -- waiting and held at the gate before its first turn
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One row per import run: what it read, what it wrote, and why it could not when it could not.
CREATE TABLE backlog.import_runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    inserted     integer     NOT NULL DEFAULT 0,
    skipped      integer     NOT NULL DEFAULT 0,
    error        text
);
