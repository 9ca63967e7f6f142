-- `abandoned_pr` (issue 27 #12): PRs referenced the issue and every one was closed unmerged. It
-- used to read `no_pr`, which the seed keeps for "no PR has ever referenced it"; a triager needs to
-- see that an attempt was made. Unresolved, like no_pr, so the stranded rows' index takes it too.
ALTER TABLE backlog.work_backlog_items DROP CONSTRAINT liveness_state_is_a_verdict;
ALTER TABLE backlog.work_backlog_items ADD CONSTRAINT liveness_state_is_a_verdict
    CHECK (liveness_state IN ('issue_closed', 'pr_open', 'pr_stalled', 'pr_merged_issue_open', 'no_pr',
                              'abandoned_pr', 'unknown', 'superseded'));

DROP INDEX backlog.work_backlog_unresolved;
CREATE INDEX work_backlog_unresolved ON backlog.work_backlog_items (held_until)
    WHERE status IN ('started', 'removed')
      AND (held_until IS NOT NULL
           OR liveness_state IN ('pr_stalled', 'pr_merged_issue_open', 'no_pr', 'abandoned_pr', 'unknown'));
