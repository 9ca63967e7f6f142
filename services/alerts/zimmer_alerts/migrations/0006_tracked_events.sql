-- Issue 26 #10: the issue tracker (Sentry, GlitchTip) receives every event of an issue, not only
-- its first: the tracker counts occurrences and notifies once per issue on its own. Each event is
-- forwarded once (claimed with a lease, like the notifications), and `tracked_at` says it went.
ALTER TABLE alerts.events ADD COLUMN tracked_at timestamptz;
ALTER TABLE alerts.events ADD COLUMN tracker_claimed_until timestamptz;
-- Events recorded before this migration were reported (their issue's first) or never will be.
UPDATE alerts.events SET tracked_at = received_at;
-- How many of an issue's events the tracker took; its failures are notification rows.
ALTER TABLE alerts.issues ADD COLUMN tracker_events integer NOT NULL DEFAULT 0;
CREATE INDEX events_untracked ON alerts.events (id) WHERE tracked_at IS NULL;
