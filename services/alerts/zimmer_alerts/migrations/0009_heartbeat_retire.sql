-- Each instance's heartbeat cadence (two missed beats read down) and its retirement: the last
-- beat of a graceful stop retires it at once (issue 29 #3); a live beat after it (the same stable
-- instance id started again) clears it.
ALTER TABLE alerts.heartbeats
    ADD COLUMN interval_seconds double precision NOT NULL DEFAULT 15 CHECK (interval_seconds > 0),
    ADD COLUMN retired_at       timestamptz;
