-- The deadline (epoch seconds) of the request that last asked spot-gate to spawn this row's
-- session. Past it that request can no longer commit anything anywhere, so the recovery job may
-- resolve a row left `starting` by asking spot-gate what exists, never by spawning (a request
-- answered `unavailable` must not take effect later).
ALTER TABLE backlog.work_backlog_items ADD COLUMN start_deadline double precision;
