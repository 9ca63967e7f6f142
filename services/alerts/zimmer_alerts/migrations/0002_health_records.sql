-- What the health rules read that JetStream does not keep (issue 15; seed 003 "cron freshness",
-- "statistics"): job runs from job_run events, the newest heartbeat of each instance, and the NATS
-- servers this process has been connected to. Read by zimmer_alerts.health_records.

-- One row per run (a tick's stream sequence), merged from its lifecycle events in any order.
CREATE TABLE alerts.job_runs (
    service      text        NOT NULL,
    job          text        NOT NULL,
    run_id       text        NOT NULL,
    lane         text        NOT NULL,
    instance_id  text        NOT NULL,
    scheduled    boolean     NOT NULL DEFAULT true,
    -- The tick's timestamp (the event's own time when an event lacks it): every row has one, so
    -- one index serves the witness probe and the prune.
    enqueued_at  timestamptz NOT NULL,
    started_at   timestamptz,
    finished_at  timestamptz,  -- finished or failed
    state        text        NOT NULL CHECK (state IN ('enqueued', 'started', 'finished', 'failed')),
    error        text,
    PRIMARY KEY (service, job, run_id)
);
-- Per key the newest enqueued / started / finished: one backward probe each (plain DESC with the
-- nulls filtered out, which the ascending index serves; DESC NULLS LAST would sort every row).
CREATE INDEX job_runs_key_enqueued ON alerts.job_runs (service, job, enqueued_at);
CREATE INDEX job_runs_key_started ON alerts.job_runs (service, job, started_at);
CREATE INDEX job_runs_key_finished ON alerts.job_runs (service, job, finished_at);
-- Cron witnesses (any key's scheduled tick near a fire time) and the 14-day prune.
CREATE INDEX job_runs_enqueued ON alerts.job_runs (enqueued_at);
-- Open runs per lane: few rows, so a partial index keeps the read independent of history.
CREATE INDEX job_runs_open ON alerts.job_runs (lane, started_at) WHERE state = 'started';
-- Finished per lane in the last hour: an index-only range scan.
CREATE INDEX job_runs_finished ON alerts.job_runs (finished_at, lane) WHERE finished_at IS NOT NULL;

-- The newest heartbeat of each instance (a day of them is kept; instances churn with deploys).
CREATE TABLE alerts.heartbeats (
    service      text        NOT NULL,
    instance_id  text        NOT NULL,
    version      text        NOT NULL,
    at           timestamptz NOT NULL,
    started_at   timestamptz NOT NULL,  -- at − uptime
    lanes        text[]      NOT NULL DEFAULT '{}',
    PRIMARY KEY (service, instance_id)
);

-- Each NATS server (its server_id changes at every start) and when this service first saw it: a
-- lower bound on when that server, and so the message schedules it fires, started.
CREATE TABLE alerts.nats_servers (
    server_id   text PRIMARY KEY,
    first_seen  timestamptz NOT NULL
);
