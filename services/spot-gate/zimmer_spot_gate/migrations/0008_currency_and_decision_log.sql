-- Issue 25: one currency for pacing, a decision log that answers "why was it held at 14:02",
-- and a keyed spawn that replays its first answer whole.

-- Burn rates in the gate's currency beside the list price (DESIGN §9 "One currency for pacing"):
-- every Claude model's tokens at Opus list prices, Codex at nothing (it spends nothing against a
-- Claude account). Rows already here take their list rate until the next recompute (20 minutes):
-- no lower than what the gate compared before this migration.
ALTER TABLE spot_gate.burn_rates ADD COLUMN opus_dollars_per_minute double precision NOT NULL DEFAULT 0;
UPDATE spot_gate.burn_rates SET opus_dollars_per_minute = dollars_per_minute WHERE harness <> 'codex';

-- What kind of outcome a row records: a turn's admission ('turn'), a ceiling pause or resume, a
-- start-now or restart refused, a wake stand-down, an auth-outage park. "The decision in force at
-- 14:02" is the newest row at or before it, so rows are read by session and time.
ALTER TABLE spot_gate.gate_decisions ADD COLUMN event text NOT NULL DEFAULT 'turn';
CREATE INDEX gate_decisions_session_time ON spot_gate.gate_decisions (session_id, decided_at DESC, id DESC);

-- The first answer of a keyed spawn (session, created, turn), written in the spawn's transaction:
-- a retry with the same key gets it back whole, its turn included.
ALTER TABLE spot_gate.sessions ADD COLUMN spawn_answer jsonb;

-- A row that is not about a turn (a ceiling pause, a park) names no turn kind.
ALTER TABLE spot_gate.gate_decisions ALTER COLUMN turn_kind DROP NOT NULL;
