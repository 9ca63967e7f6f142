"""Session logs: ingest, timeline, retention and its readings."""
