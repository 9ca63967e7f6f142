"""Session logs, clones, transcripts and trash (sweeper service)."""
