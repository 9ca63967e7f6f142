-- The level a page's log record is written at, when lower than the page's (issue 27 #4): the
-- stranded alert pages at error and logs at WARN, so the log sink writes it at WARN and it joins
-- no ERROR page group; before, it paged twice (its issue, then the group of its ERROR record).
ALTER TABLE alerts.issues ADD COLUMN log_level text CHECK (log_level IN ('warning', 'error'));
