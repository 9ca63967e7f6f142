-- Issue 26 #3: every ERROR page repeats, not only a condition's. A page with no condition keeps
-- its title's group firing while its events keep arriving: the newest one's time is kept here, and
-- the group resolves once none arrived for one repeat interval (the log rule's model: it fires
-- while ERROR records arrive).
ALTER TABLE alerts.page_groups ADD COLUMN last_event_at timestamptz;
