-- Issue 26 #9: the notifier claims what it will send in a short transaction, sends outside any
-- transaction, and records each outcome in its own. A claim is a lease: a notifier that dies while
-- sending lets it lapse and another sends it (at least once; a sink call is never inside a lock).
ALTER TABLE alerts.issues ADD COLUMN claimed_until timestamptz;
ALTER TABLE alerts.page_groups ADD COLUMN claimed_until timestamptz;
