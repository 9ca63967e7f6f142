-- Wall-clock wakes (seed 004 "A pause outranks precedence", "A pause is a floor, not a promotion"):
-- one-time wake schedules on sessions, from Pause Until (a person) or wake_me_up_later (an agent),
-- fired by a job every minute. A session with an unfired wake still ahead does not start early.
CREATE TABLE spot_gate.session_wakes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id    bigint      NOT NULL REFERENCES spot_gate.sessions (id),
    wake_at       timestamptz NOT NULL,
    prompt        text,
    set_by        text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    fired_at      timestamptz,
    cancelled_at  timestamptz
);
-- At most one armed wake per session: a new pause replaces the one before it.
CREATE UNIQUE INDEX session_wakes_one_armed ON spot_gate.session_wakes (session_id)
    WHERE fired_at IS NULL AND cancelled_at IS NULL;
CREATE INDEX session_wakes_due ON spot_gate.session_wakes (wake_at)
    WHERE fired_at IS NULL AND cancelled_at IS NULL;

-- StrandedSleepSweepJob: how many times a session asleep on a wake that can never fire was rescued
-- (past MAX_RESCUES it pages and stops rather than resuming forever).
ALTER TABLE spot_gate.sessions ADD COLUMN stranded_rescues integer NOT NULL DEFAULT 0;
