-- The budget is a ceiling (seed 004): the ceiling sweep pauses running spot sessions when a window
-- is at its utilization limit and resumes them when there is room again. A pause is recorded on
-- the session, never silent: who paused it, when, why (the gate's own sentence) and how often.
ALTER TABLE spot_gate.sessions
    ADD COLUMN paused_by text CHECK (paused_by IN ('spot_quota', 'auth_outage')),
    ADD COLUMN spot_pause_at timestamptz,
    ADD COLUMN spot_pause_reason text CHECK (spot_pause_reason IN ('at_utilization_limit', 'user_spot_queue',
                                                                   'auth_outage')),
    -- An auth-outage park: the account whose outage parked it (the un-park sweep waits for it).
    ADD COLUMN parked_account text,
    ADD COLUMN spot_pause_detail text,
    ADD COLUMN spot_pause_count integer NOT NULL DEFAULT 0,
    -- The runtime acknowledged the stop (its status report after the stop): until then the
    -- session's process may still be running and it keeps its slot.
    ADD COLUMN spot_pause_acked_at timestamptz,
    -- "Resume with": delivered in place of the recovery nudge when the sweep resumes it.
    ADD COLUMN resume_prompt text,
    ADD CONSTRAINT a_pause_is_whole CHECK ((paused_by IS NULL) = (spot_pause_at IS NULL)
                                           AND (paused_by IS NULL) = (spot_pause_reason IS NULL));
-- Archive (the Ranked view's Trash) and unarchive: when it was archived, for the trash pipeline.
-- The status it had, so an Undo puts it back as it was (a running turn was stopped: needs_input).
ALTER TABLE spot_gate.sessions ADD COLUMN archived_at timestamptz, ADD COLUMN archived_from_status text;
-- The resume order: highest precedence first, oldest pause first within a tie.
CREATE INDEX sessions_paused_queue ON spot_gate.sessions (precedence DESC, spot_pause_at, id)
    WHERE paused_by IS NOT NULL;
