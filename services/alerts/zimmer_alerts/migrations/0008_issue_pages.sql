-- The ledger's list, a page at a time (issue 27 #13): its keyset (last_seen, id) is an index range
-- scan, and each issue's last event and newest notifications are read by issue, not by scanning
-- every event or notification the ledger ever recorded.
CREATE INDEX issues_by_last_seen ON alerts.issues (last_seen DESC, id DESC);
CREATE INDEX events_by_issue ON alerts.events (issue_id, id);
CREATE INDEX notifications_by_issue ON alerts.notifications (issue_id, id) WHERE issue_id IS NOT NULL;
