-- Clones (issue 16; seed 003 "A deleted session takes its directories with it" onwards): what the
-- runtime reports of each session's working directory, the unarchive stamp, durable warnings, and
-- a session delete that takes its own history with it.

-- The clone as the runtime reported it on zimmer.ingest.clone (clone_path is 0001's column).
-- clone_reported_at: the report's own time, so a late redelivery of an older report never
-- overwrites a newer clone (a re-clone after an unarchive lands at a new path).
ALTER TABLE spot_gate.sessions
    ADD COLUMN agent_subdirectory text,
    ADD COLUMN clone_scaffolded boolean NOT NULL DEFAULT false,
    ADD COLUMN clone_host text,
    ADD COLUMN clone_reported_at timestamptz,
    -- Stamped by an unarchive, cleared when the sweeper says the restore finished (or by the next
    -- archive): honoured for 30 minutes as reap protection whatever the status says.
    ADD COLUMN unarchive_started_at timestamptz;

-- A clone's basename: the globally unique handle the sweepers match ownership on (clone names carry
-- a timestamp and a random suffix). One definition, in SQL, used by the index and by every query
-- (zimmer_spot_gate.store.clones): an expression index rather than a stored column because nothing
-- then has to keep a second column in step with clone_path, and an asked path's basename is
-- computed by the same function as the stored one's, so the two can never disagree. Trailing
-- slashes do not count ('/c/x/' is 'x'); a path without a slash is its own basename.
CREATE FUNCTION spot_gate.clone_basename(path text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT substring(rtrim(path, '/') FROM '[^/]*$') $$;
CREATE INDEX sessions_clone_basename ON spot_gate.sessions (spot_gate.clone_basename(clone_path))
    WHERE clone_path IS NOT NULL;

-- A durable warning on a session (a refused reap: the guard caught a stale snapshot), shown where
-- an operator looks (get_session, the session page).
CREATE TABLE spot_gate.session_warnings (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  bigint      NOT NULL REFERENCES spot_gate.sessions (id) ON DELETE CASCADE,
    kind        text        NOT NULL,
    message     text        NOT NULL,
    source      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_warnings_newest ON spot_gate.session_warnings (session_id, id DESC);

-- Deleting a session (DELETE /api/v1/sessions/{id}) takes its own history with it: whatever any
-- delete path forgets, the database does not. A child's or fork's link to it is set NULL by the
-- delete itself (zimmer_spot_gate.deletion), which also versions those rows; the lineage foreign
-- keys stay NO ACTION so that no other path can unlink them silently.
ALTER TABLE spot_gate.enqueued_messages DROP CONSTRAINT enqueued_messages_session_id_fkey,
    ADD CONSTRAINT enqueued_messages_session_id_fkey FOREIGN KEY (session_id)
        REFERENCES spot_gate.sessions (id) ON DELETE CASCADE;
ALTER TABLE spot_gate.gate_decisions DROP CONSTRAINT gate_decisions_session_id_fkey,
    ADD CONSTRAINT gate_decisions_session_id_fkey FOREIGN KEY (session_id)
        REFERENCES spot_gate.sessions (id) ON DELETE CASCADE;
ALTER TABLE spot_gate.session_wakes DROP CONSTRAINT session_wakes_session_id_fkey,
    ADD CONSTRAINT session_wakes_session_id_fkey FOREIGN KEY (session_id)
        REFERENCES spot_gate.sessions (id) ON DELETE CASCADE;
-- The children's lookups by parent exist (sessions_parent); the forks' do not.
CREATE INDEX sessions_forked_from ON spot_gate.sessions (forked_from_session_id)
    WHERE forked_from_session_id IS NOT NULL;
