-- The alerts ledger (seed 003 "Alerts"; issue 11): what was reported, how it was grouped, and
-- who was told through which sink and when.

-- Issues (GlitchTip's rule): events grouped by fingerprint; an issue notifies once, ever.
CREATE TABLE alerts.issues (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    fingerprint   text        NOT NULL UNIQUE,
    title         text        NOT NULL,
    level         text        NOT NULL CHECK (level IN ('warning', 'error')),
    source        text        NOT NULL,
    events        integer     NOT NULL DEFAULT 0,
    first_seen    timestamptz NOT NULL,
    last_seen     timestamptz NOT NULL,
    notified_at   timestamptz
);

-- Every page received, once (event_id is the sender's outbox event id).
CREATE TABLE alerts.events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id       text        NOT NULL UNIQUE,
    issue_id       bigint      NOT NULL REFERENCES alerts.issues (id),
    title          text        NOT NULL,
    level          text        NOT NULL,
    source         text        NOT NULL,
    message        text        NOT NULL,
    context        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    snippet        text,
    condition_key  text,
    still_true     boolean     NOT NULL DEFAULT true,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_by_time ON alerts.events (occurred_at DESC);

-- The repeating page: conditions that last, grouped per title (Alertmanager's model).
CREATE TABLE alerts.conditions (
    condition_key  text PRIMARY KEY,
    title          text        NOT NULL,
    level          text        NOT NULL CHECK (level IN ('warning', 'error')),
    source         text        NOT NULL,
    still_true     boolean     NOT NULL,
    first_seen     timestamptz NOT NULL,
    last_seen      timestamptz NOT NULL,
    resolved_at    timestamptz
);

CREATE TABLE alerts.page_groups (
    title          text PRIMARY KEY,
    level          text        NOT NULL CHECK (level IN ('warning', 'error')),
    first_seen     timestamptz NOT NULL,
    last_joined    timestamptz NOT NULL,
    last_notified  timestamptz,
    notifications  integer     NOT NULL DEFAULT 0,
    -- When the group stopped firing, its resolution was sent (Alertmanager's endsAt) at this time.
    resolution_sent_at timestamptz
);

-- Who was told, through which sink, and what came of it; a skipped sink says why.
CREATE TABLE alerts.notifications (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    issue_id      bigint REFERENCES alerts.issues (id),
    group_title   text,
    sink          text        NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('sent', 'failed', 'not_allowed', 'not_configured')),
    detail        text        NOT NULL DEFAULT '',
    attempts      integer     NOT NULL DEFAULT 1,
    at            timestamptz NOT NULL,
    CHECK (issue_id IS NOT NULL OR group_title IS NOT NULL)
);
CREATE INDEX notifications_by_time ON alerts.notifications (at DESC);
