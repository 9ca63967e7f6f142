-- Queue recovery mode (issue 15; seed 003 "Queue recovery mode"): Zimmer's own metadata about the
-- halt. The halt itself is JetStream's (each demand-side consumer paused with a pause_until), so
-- this row is who, why, when it lifts by itself and which consumers it paused. One row, ever:
-- entering again extends it; exiting stamps exited_at and keeps the rest for the record.
CREATE TABLE alerts.queue_recovery_mode (
    id                smallint    PRIMARY KEY CHECK (id = 1),
    entered_by        text        NOT NULL,
    reason            text        NOT NULL,
    entered_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    lanes             text[]      NOT NULL DEFAULT '{}',
    paused_consumers  text[]      NOT NULL DEFAULT '{}',
    exited_at         timestamptz,  -- NULL while it has not been lifted (by a person or the TTL)
    exited_by         text
);
