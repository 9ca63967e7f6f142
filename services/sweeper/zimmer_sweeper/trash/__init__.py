"""The trash pipeline of archived sessions' clones (seed 003, DeferredCloneCleanupJob and its
neighbours; docs/trash.md): the archive/unarchive consumer records, the deferred cleanup preserves
a dirty clone with bounded git (a bundle and a patch) and deletes it through the guard, the restore
on unarchive rebuilds it, EmptyTrash takes what is left after the reversible window, the daily
mangled clone report, and the archived-session pass of the hourly stale cleanup.

Modules: `domain` (the rules: states, retries, deadlines, what is restorable, defusal), `tables`,
`store` (the records' SQL), `git_artifacts` (every git command), `cleanup`, `restore`, `empty`,
`archived_reap`, `mangled_report`, `metrics`, `config`, and `app` (the wiring).

Offers other concepts: nothing imported. `bootstrap.py` hands `TrashApp.archived.sweep` to the
stale cleanup's `reap_due_archived`.

Uses of other concepts: the ownership guard (`zimmer_sweeper.clones.guard.CloneReaper`) for every
clone it deletes; disk's floor (`zimmer_sweeper.disk.domain`, `.volumes`, `.removal` for the
artifacts, scratch and attachments it owns, `.sweep_run`, `.records`, `.metrics`, `.app`).
"""
