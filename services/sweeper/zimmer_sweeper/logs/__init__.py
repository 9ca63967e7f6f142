"""Session logs (seed 003 "Log retention"): lines ingested from `zimmer.ingest.logs` into the
`logs` table with COPY, a session's timeline a page at a time, retention by whole day partitions
under two windows, deleted sessions' lines purged, and the Log Retention readings.

Modules: `domain` (the rules: level class, day partitions, what to create and drop, the warning),
`tables`, `partitions` (the catalog), `decode` and `copytext` (a message to COPY rows),
`known_sessions`, `ingest`, `ingest_lag`, `retention` (the jobs), `timeline`, `health`, `metrics`,
`config`, and `app` (the wiring).

Offers other concepts: nothing; only `bootstrap.py` wires it (`zimmer_sweeper.logs.app`).

Uses of other concepts: nothing (the shared `zimmer_sweeper.schema` only).
"""
