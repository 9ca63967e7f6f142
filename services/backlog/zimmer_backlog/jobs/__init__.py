"""The backlog's jobs (seed 003's cron table says when each runs; docs/jobs.md): recovering items an
interrupted start left `starting`, the liveness sweep and the stranded alert (`liveness`), and the
GitHub snapshot behind the Issues view (`snapshot`). `backlog_jobs` is what bootstrap registers, in
this order."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from zimmer_common.jobs import JobContext, JobSpec
from zimmer_common.logs import kv

if TYPE_CHECKING:
    from zimmer_backlog.handlers.start import Starter
    from zimmer_backlog.jobs.liveness import LivenessSweep
    from zimmer_backlog.jobs.snapshot import GithubSnapshot

log = logging.getLogger("zimmer.backlog")


def backlog_jobs(starter: Starter, liveness: LivenessSweep, snapshot: GithubSnapshot) -> list[JobSpec]:
    async def recover_starting(ctx: JobContext) -> None:
        """Finish or roll back items an interrupted start left `starting`, with the same key."""
        outcomes = await starter.recover()
        if outcomes:
            log.info("recovered starting items", extra=kv(outcomes=[type(o).__name__ for o in outcomes]))

    async def liveness_sweep(ctx: JobContext) -> None:
        await liveness.run()

    async def github_snapshot(ctx: JobContext) -> None:
        await snapshot.run()

    return [JobSpec("recover_starting", "default", recover_starting),
            JobSpec("liveness_sweep", "pollers", liveness_sweep),
            JobSpec("github_snapshot", "pollers", github_snapshot)]
