"""Transcript directories and live clones (seed 003, "The transcript directory outlives the clone";
docs/transcripts.md): each directory under the transcripts root classified live / orphaned /
unknown against what exists, the orphan transcript sweep and the reaper the guard calls once a
clone is gone, live clone integrity, and the transcript archive (zips in the object store).

Modules: `domain` (the rules: the derivation, liveness, collisions, selection, the root's fence),
`fs` (the filesystem half of the sweep), `sweep`, `integrity`, `archive`, `archive_zip`, `tables`
(the archive's checkpoint), and `app` (the wiring).

Offers other concepts: nothing imported. `bootstrap.py` hands `TranscriptApp.sweep.reap` to the
guard's `reap_transcripts`.

Uses of other concepts: `zimmer_sweeper.clones.listing` (the sessions' clones spot-gate lists);
disk's floor (`zimmer_sweeper.disk.domain` for tombstones and the fence, `.volumes`, `.records`,
`.metrics`, `.tables` for integrity's previous run, `.app`).
"""
