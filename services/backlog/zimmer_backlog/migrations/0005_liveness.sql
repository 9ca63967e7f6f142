-- The liveness sweep, holds for a human decision and the stranded alert (seed 000, "When a row
-- leaves the queue and goes nowhere" through "The alert has to reach a human more than once"),
-- and the GitHub snapshot the Issues view reads.

-- When the session a row became ended (archived or failed), from spot-gate's events: a started row
-- is a liveness candidate once its session has been over for the sweep's grace.
ALTER TABLE backlog.produced_sessions ADD COLUMN ended_at timestamptz;

ALTER TABLE backlog.work_backlog_items ADD CONSTRAINT liveness_state_is_a_verdict
    CHECK (liveness_state IN ('issue_closed', 'pr_open', 'pr_stalled', 'pr_merged_issue_open', 'no_pr',
                              'unknown', 'superseded'));
ALTER TABLE backlog.work_backlog_items ADD CONSTRAINT a_hold_is_whole
    CHECK ((held_at IS NULL) = (held_until IS NULL) AND (held_at IS NULL) = (hold_reason IS NULL)
           AND (held_at IS NULL) = (held_liveness_state IS NULL));
-- The sweep's candidates, least recently checked first.
CREATE INDEX work_backlog_liveness_candidates ON backlog.work_backlog_items (liveness_checked_at NULLS FIRST, id)
    WHERE status IN ('started', 'removed');

-- The stranded and held population the counts read (small: a triage queue, not the table).
CREATE INDEX work_backlog_unresolved ON backlog.work_backlog_items (held_until)
    WHERE status IN ('started', 'removed')
      AND (held_until IS NOT NULL OR liveness_state IN ('pr_stalled', 'pr_merged_issue_open', 'no_pr', 'unknown'));

-- Expiring high-water marks: the band the stranded alert last paged for (name 'stranded'), and the
-- probe key the sweep writes and reads back before it pages (name 'probe'), kept apart so a failed
-- probe can never leave a band written that no page went out for.
CREATE TABLE backlog.alert_marks (
    name        text PRIMARY KEY,
    weeks       integer     NOT NULL DEFAULT 0,
    row_band    integer     NOT NULL DEFAULT 0,
    token       text,
    paged_at    timestamptz,
    expires_at  timestamptz NOT NULL
);

-- One row per liveness pass: what it examined, what it could not read, and whether it paged.
CREATE TABLE backlog.liveness_passes (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at          timestamptz NOT NULL,
    finished_at         timestamptz,
    examined            integer     NOT NULL DEFAULT 0,
    unknown             integer     NOT NULL DEFAULT 0,
    requests            integer     NOT NULL DEFAULT 0,
    unreadable_repos    text[]      NOT NULL DEFAULT '{}',
    rate_limited        boolean     NOT NULL DEFAULT false,
    stranded            integer,
    oldest_stranded_age_seconds double precision,
    paged               text
);

-- The Issues view's GitHub side: what the snapshot job last saw of each gated repository's issues
-- (an issue open at one snapshot and absent from a later complete listing is recorded closed) ...
CREATE TABLE backlog.github_issues (
    repo        text        NOT NULL,  -- owner/name, lower case
    number      integer     NOT NULL,
    title       text        NOT NULL DEFAULT '',
    state       text        NOT NULL CHECK (state IN ('open', 'closed')),
    seen_at     timestamptz NOT NULL,
    PRIMARY KEY (repo, number)
);
-- ... and the open-issue count per repository over time (the trend chart).
CREATE TABLE backlog.github_open_issue_counts (
    repo        text        NOT NULL,
    taken_at    timestamptz NOT NULL,
    open_issues integer     NOT NULL,
    complete    boolean     NOT NULL,
    PRIMARY KEY (repo, taken_at)
);
