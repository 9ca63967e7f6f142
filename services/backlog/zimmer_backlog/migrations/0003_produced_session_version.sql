-- The newest word on a produced session is the one with the highest version (spot-gate bumps it
-- in the UPDATE that changes the row); timestamps written by two clocks are never compared.
ALTER TABLE backlog.produced_sessions ADD COLUMN version bigint NOT NULL DEFAULT -1;
