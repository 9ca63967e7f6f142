"""Clones on this host's disk (seed 003, "One job owns the clones" through "A clone is only deleted
if nobody live still owns it"): the ownership guard that asks spot-gate who owns a clone at the
instant of deletion and fails closed, the Docker Compose teardown before a clone's bytes go, the
sessions' clones as spot-gate lists them, the orphan clone sweep with its urgent gear (reclaim),
and the stale cleanup (tombstones, a deleted session's scratch and attachment directories).

Modules: `domain` (the rules: orphan candidates, session-id directories, the numbers), `compose`,
`guard`, `listing`, `orphans`, `stale`, and `app` (the wiring).

Offers other concepts:
- `zimmer_sweeper.clones.guard`: the ownership guard, `CloneReaper` (`remove_clone`, `ReapResult`),
  through which the trash pipeline deletes a clone; its `reap_transcripts` hook is where the
  transcript reaper is handed over (by `bootstrap.py`);
- `zimmer_sweeper.clones.listing`: `all_clones`, the sessions' clones as spot-gate lists them
  (live, or every one of a host's), which the transcript sweep, integrity check and archive read.

Uses of other concepts: disk's floor (`zimmer_sweeper.disk.domain`, `.volumes`, `.removal`,
`.sweep_run`, `.records`, `.metrics`, `.app`) and `RECLAIM_JOB` from `zimmer_sweeper.disk.watch`;
`OrphanCloneSweep` answers the monitor's `Reclaimer`. The stale cleanup's `reap_due_archived` hook
takes the trash pipeline's archived-session pass (handed over by `bootstrap.py`).
"""
