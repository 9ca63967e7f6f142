"""Transcript directories, live clone integrity and the transcript archive."""
