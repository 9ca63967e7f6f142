-- Issue 32 #4: the Quotas charts' history (DESIGN §9 "History for charts"), kept by spot-gate, which
-- owns the figures. One point a minute per window (record_pool_history), folded into one per 15
-- minutes after 7 days and dropped after 90 (pool_history_retention, zimmer_common.history), so the
-- table holds about 2 × (7 × 1,440 + 83 × 96) rows whatever the deployment's age.
CREATE TABLE spot_gate.pool_history (
    resolution_minutes  smallint    NOT NULL CHECK (resolution_minutes IN (1, 15)),
    window_name         text        NOT NULL CHECK (window_name IN ('five_hour', 'seven_day')),
    at                  timestamptz NOT NULL,  -- where the point's bucket starts
    samples             integer     NOT NULL CHECK (samples >= 1),  -- the minutes it stands for
    -- Levels (folded as the mean over the minutes that have them): pooled utilization (NULL: no
    -- account had a reading of the window), the pacing curve (NULL: no account recorded when the
    -- window resets), the priority reserve, the calibrated capacity (NULL: not calibrated).
    utilization         double precision,
    pacing              double precision,
    reserve             double precision NOT NULL,
    capacity_dollars    double precision,
    -- Peaks (folded as the highest): sessions running, held at the gate, asleep in the spot queue.
    running             integer     NOT NULL,
    held                integer     NOT NULL,
    paused              integer     NOT NULL,
    -- Events since the point before (folded as the sum): turns the gate held, sessions the ceiling
    -- sweep paused, and resumed.
    holds               integer     NOT NULL,
    pauses              integer     NOT NULL,
    resumes             integer     NOT NULL,
    PRIMARY KEY (resolution_minutes, window_name, at)
);
-- Retention walks each resolution from its oldest point.
CREATE INDEX pool_history_oldest ON spot_gate.pool_history (resolution_minutes, at);
-- The recorder counts the decisions logged since its last point by decided_at: a short range of
-- gate_decisions_decided_at, which 0011 (the dry-run's record, issue 32 #5) creates.
