-- Issue 32 #4: the Health charts' history (DESIGN §9 "History for charts"), kept by alerts, which
-- computes the figures. One point a minute per queue lane, from the health monitor's check (every
-- replica's check writes the same minute once), folded into one per 15 minutes after 7 days and
-- dropped after 90 by health_records_prune (zimmer_common.history).
CREATE TABLE alerts.lane_history (
    resolution_minutes       smallint    NOT NULL CHECK (resolution_minutes IN (1, 15)),
    lane                     text        NOT NULL,
    at                       timestamptz NOT NULL,  -- where the point's bucket starts
    samples                  integer     NOT NULL CHECK (samples >= 1),  -- the checks it stands for
    -- Peaks (folded as the highest): messages waiting and being worked, the oldest waiting one's age
    -- (NULL: nothing waited), and the lane's thresholds then.
    ready                    integer     NOT NULL,
    claimed                  integer     NOT NULL,
    oldest_ready_age_seconds double precision,
    depth_threshold          integer     NOT NULL,
    stall_age_seconds        double precision NOT NULL,
    PRIMARY KEY (resolution_minutes, lane, at)
);
-- Retention walks each resolution from its oldest point.
CREATE INDEX lane_history_oldest ON alerts.lane_history (resolution_minutes, at);
