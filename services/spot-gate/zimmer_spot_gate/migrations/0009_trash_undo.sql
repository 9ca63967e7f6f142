-- Issue 32 #7: what an archive dropped (a hold, the held turn and its prompt, a pause), so that an
-- unarchive (the Ranked view's Undo) restores exactly what the Trash took. NULL when the archive
-- dropped nothing; the unarchive that restores it clears it.
ALTER TABLE spot_gate.sessions ADD COLUMN archived_waits jsonb;
