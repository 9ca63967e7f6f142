-- The counts read only the sessions that hold a claim (running, waiting, needs_input): a few, where
-- produced_sessions keeps every session the backlog ever produced. Without this index every count
-- scanned that whole history, and an append batch counts under the ranking lock (29 ms a batch at
-- 100,000 produced sessions).
CREATE INDEX produced_sessions_claimed ON backlog.produced_sessions (status)
    WHERE status IN ('running', 'waiting', 'needs_input');
