-- An issue URL is a GitHub issue URL (seed 000; issue 9: "" and "not a url" were stored). The
-- contract refuses anything else, naming the field; this keeps the table honest for any other
-- writer. NOT VALID: rows written before it are left as they are.
ALTER TABLE backlog.work_backlog_items ADD CONSTRAINT issue_url_is_a_github_issue
    CHECK (issue_url IS NULL OR issue_url ~ '^https://github\.com/[^/]+/[^/]+/issues/[0-9]+$') NOT VALID;
