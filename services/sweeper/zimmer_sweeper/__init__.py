"""Session logs, clones, transcripts and trash (sweeper service), one subpackage per concept.

- `logs/`: session log lines: the ingest, the timeline, retention, the Log Retention readings;
- `disk/`: this host's disk: roots and fences, how every sweep is recorded and counted, the atomic
  removal, the free-space monitor, the Disk and clones readings;
- `clones/`: the ownership guard, the orphan clone sweep and its reclaim, the stale cleanup;
- `trash/`: the trash pipeline of archived sessions' clones;
- `transcripts/`: transcript directories, live clone integrity, the transcript archive.

Each concept keeps its rules (`domain.py`, pure), its tables and store, its jobs and its wiring
(`app.py`); `bootstrap.py` builds and joins them, `service.py` is the process. `schema.py` (the
one PostgreSQL schema), `bus_link.py` (the bus, once connected) and `migrations/` are every
concept's. A module imports another concept only through the modules that concept's `__init__`
names under "Offers"; what each concept uses of the others is listed there too. The concepts
stand on each other in one direction: logs alone; disk beneath clones; disk and clones beneath
trash and transcripts.
"""
