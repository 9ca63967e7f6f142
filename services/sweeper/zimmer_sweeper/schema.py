"""The sweeper's one PostgreSQL schema, which every concept's tables live in (logs, disk, trash,
transcripts; `migrations/` builds them all, in one sequence)."""

from __future__ import annotations

SCHEMA = "sweeper"
ARGS = {"schema": SCHEMA}
