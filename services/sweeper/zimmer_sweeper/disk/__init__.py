"""This host's disk, as every sweep stands on it (issue 16, seed 003): the configured roots and the
fence saying where this deployment may delete, listing a root and reading its volume, the atomic
removal with its deletion tombstones, what every sweep run records (disk_runs, disk_refusals) and
counts, the free-space monitor (disk_roots; it asks a reclaimer for room), and the Disk and clones
readings.

Modules: `domain` (the rules: tombstone names, a listed entry, the fence, a scheduled sweep's
budget), `config`, `volumes`, `removal`, `tables`, `records`, `sweep_run`, `metrics`, `watch` (the
free-space monitor), `health` (the readings), and `app` (the wiring).

Offers other concepts (the floor the clone, trash and transcript sweeps stand on):
- `zimmer_sweeper.disk.domain`: `DirEntry`, `Fence`/`fence`, `is_tombstone`, `TOMBSTONE_MARK`,
  `SWEEP_BUDGET_SECONDS` (pure);
- `zimmer_sweeper.disk.volumes`: `Roots` (each root with its fence), `list_root`, `resolve_root`,
  `FreeSpace`/`statvfs_free`;
- `zimmer_sweeper.disk.removal`: `remove_atomically` (a directory the caller owns; a clone a
  session could own goes through the guard instead) and `reap_tombstones`;
- `zimmer_sweeper.disk.sweep_run`: `SweepRun` and `record`, one run written down and counted;
  `zimmer_sweeper.disk.records`: `DiskRecords` (`counts_of`); `zimmer_sweeper.disk.metrics`:
  `DiskMetrics`; `zimmer_sweeper.disk.tables`: `DiskRunRow`, for a job reading back its own runs;
- `zimmer_sweeper.disk.watch`: `Reclaimer`, what the monitor asks for room (the orphan clone
  sweep answers it), and `RECLAIM_JOB`, the job a reclaim's runs are recorded under;
- `zimmer_sweeper.disk.app`: `HostDisk`, the handle each concept's wiring is given.

Uses of other concepts: nothing. The reclaimer is handed over by `bootstrap.py`.
"""
