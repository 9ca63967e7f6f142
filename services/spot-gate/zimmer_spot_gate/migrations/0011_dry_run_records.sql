-- Issue 32 #5: what the policy dry-run replays, recorded from now on.

-- Each decision's inputs as the gate saw them (domain/gate.py GateCall: the policy, each window's
-- pooled reading, calibration and observed rate, the fleet, the candidate, the margin), so a
-- replay at the recorded settings decides exactly as the gate did. NULL on rows that are not a
-- gate evaluation (a start without asking, a park) and on rows older than this migration.
ALTER TABLE spot_gate.gate_decisions ADD COLUMN inputs jsonb;
-- The dry-run reads the log by time, not by session.
CREATE INDEX gate_decisions_decided_at ON spot_gate.gate_decisions (decided_at, id);

-- Every ceiling sweep's own decision (what the gate says to a new spot session, every 5 minutes),
-- whether or not it paused anything: the replay's clock of the windows between admissions, and
-- the sweeps a replay at other settings would have paused on. Kept 15 days (a bounded delete).
CREATE TABLE spot_gate.gate_sweeps (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    swept_at timestamptz NOT NULL,
    allowed boolean NOT NULL,
    reason text NOT NULL,
    ceiling text,
    paused integer NOT NULL DEFAULT 0,
    inputs jsonb NOT NULL
);
CREATE INDEX gate_sweeps_swept_at ON spot_gate.gate_sweeps (swept_at, id);

-- When each session started and stopped running, on the gate's clock: the record of what ran
-- (peak running, and how long the work a replay holds or admits differently ran). Not a foreign
-- key: a deleted session's runs stay part of what happened. Kept 15 days (a bounded delete).
CREATE TABLE spot_gate.session_runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id bigint NOT NULL,
    at timestamptz NOT NULL,
    running boolean NOT NULL,
    takes_slot boolean NOT NULL,
    exempt text
);
CREATE INDEX session_runs_at ON spot_gate.session_runs (at, id);
CREATE INDEX session_runs_session ON spot_gate.session_runs (session_id, at DESC, id DESC);
