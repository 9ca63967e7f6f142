-- A per-session version, incremented by every UPDATE of the row, carried on every session event:
-- consumers keep the highest version they have seen, and never compare timestamps written by two
-- clocks (the service's and the database's).
ALTER TABLE spot_gate.sessions ADD COLUMN version bigint NOT NULL DEFAULT 0;

-- The re-check pass works the due holds highest precedence first, oldest first within a tie.
CREATE INDEX sessions_hold_due_by_precedence ON spot_gate.sessions (precedence DESC, created_at, id)
    WHERE spot_hold_reason IS NOT NULL;
