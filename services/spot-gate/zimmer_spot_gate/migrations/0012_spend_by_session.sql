-- One session's spend (its page, get_session: issue 32 #6): the ledger's reports naming it, found by
-- an index range instead of a scan of every report ever recorded.
CREATE INDEX spend_ledger_session ON spot_gate.spend_ledger (session_id) WHERE session_id IS NOT NULL;
