"""The schedule: one table, in code, of every recurring job of every service (seed 003, "The
cron schedule"; DESIGN §4).

Each entry names its cadence, job, lane and the environments it runs in. `test` runs nothing:
a sweep firing mid-test is a source of flakes; tests that exercise the runner install their
own entries. The fully resolved schedule per environment is pinned by a snapshot test
(tests/fixtures/job_schedule.json) and every job must appear in docs/jobs.md: an entry that
goes missing does not error, it just never runs, so omissions must be visible in a diff.

Regenerate the snapshot deliberately, then read the diff:
    python -m zimmer_common.schedule > tests/fixtures/job_schedule.json
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from croniter import croniter

from zimmer_common.lanes import LANES
from zimmer_common.settings import Environment

ALL = frozenset(Environment) - {Environment.TEST}
# Development runs nothing that spends money or quota (GitHub's API budget included), or reaps real
# disk: such a job names production and staging only. Every entry names its environments.
PRODUCTION_AND_STAGING = frozenset({Environment.PRODUCTION, Environment.STAGING})

_EVERY = re.compile(r"^@every\s+(\d+)(ms|s|m|h)$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True)
class ScheduleEntry:
    service: str  # deployment name, e.g. "spot-gate"
    job: str
    cadence: str  # "@every 30s" or six-field cron with leading seconds: "0 */5 * * * *"
    lane: str
    environments: frozenset[Environment]
    description: str = ""
    # The sentence saying why this key may go silent for longer than its cadence: the cron
    # freshness check then reads it as "exempt" and never judges it (seed 003 "cron freshness").
    freshness_exempt: str | None = None
    # Every host's instance runs it on its own disk (the sweeper's disk sweeps): one schedule per
    # host, and cron freshness judges each host's key apart.
    per_host: bool = False

    def __post_init__(self) -> None:
        validate_cadence(self.cadence)
        if self.lane not in LANES:
            raise ScheduleError(f"{self.service}.{self.job}: unknown lane {self.lane!r}")
        if self.freshness_exempt is not None:
            why = self.freshness_exempt.strip()
            if len(why) < 20 or not why.endswith("."):
                raise ScheduleError(f"{self.service}.{self.job}: freshness_exempt must be the sentence saying why "
                                    f"it may go silent (at least 20 characters, ending with '.'), not {why!r}")

    @property
    def key(self) -> str:
        return f"{self.service}.{self.job}"


def validate_cadence(cadence: str) -> None:
    if _EVERY.match(cadence):
        return
    if len(cadence.split()) != 6 or not croniter.is_valid(cadence, second_at_beginning=True):
        raise ScheduleError(f"cadence {cadence!r} is neither '@every <n>(s|m|h)' nor six-field cron (seconds first)")


def next_fire_times(cadence: str, after: datetime, count: int = 2) -> list[datetime]:
    """When a cadence fires next; used to prove sub-minute cron fires sub-minute."""
    m = _EVERY.match(cadence)
    if m:
        step = timedelta(seconds=int(m.group(1)) * _UNITS[m.group(2)])
        return [after + step * (i + 1) for i in range(count)]
    it = croniter(cadence, after, second_at_beginning=True)
    return [it.get_next(datetime) for _ in range(count)]


SCHEDULE: tuple[ScheduleEntry, ...] = (
    ScheduleEntry("backlog", "outbox_prune", "0 */10 * * * *", "maintenance", ALL,
                  description="Delete relayed outbox rows and processed-message records older than 7 days"),
    ScheduleEntry("backlog", "recover_starting", "45 * * * * *", "default", ALL,
                  description="Finish or roll back work backlog items an interrupted start left `starting`"),
    ScheduleEntry("backlog", "liveness_sweep", "0 7 * * * *", "pollers", PRODUCTION_AND_STAGING,
                  description="WorkBacklogLivenessSweepJob: record what GitHub says of rows that left the queue; "
                              "page lapsed holds and the stranded band"),
    ScheduleEntry("backlog", "github_snapshot", "0 */10 * * * *", "pollers", PRODUCTION_AND_STAGING,
                  description="List the gated repositories' open issues for the Issues view, and the open-issue trend"),
    ScheduleEntry("spot-gate", "outbox_prune", "10 */10 * * * *", "maintenance", ALL,
                  description="Delete relayed outbox rows and processed-message records older than 7 days"),
    ScheduleEntry("spot-gate", "recheck_due", "*/15 * * * * *", "default", ALL,
                  description="Re-check held spot sessions whose spot_hold_retry_at has come, carrying the turn they hold"),
    ScheduleEntry("spot-gate", "hold_repair", "0 */5 * * * *", "default", ALL,
                  description="SpotHoldSweepJob: put held sessions >10 min overdue back on the ladder, 10 a sweep, over 3 min"),
    ScheduleEntry("spot-gate", "ceiling_sweep", "20 */5 * * * *", "default", ALL,
                  description="SpotCeilingSweepJob: pause running spot sessions at the utilization limit; resume "
                              "paused ones with headroom, 5 a sweep"),
    ScheduleEntry("spot-gate", "fire_wakes", "5 * * * * *", "default", ALL,
                  description="Deliver due wall-clock wakes (Pause Until, wake_me_up_later) as gated wake turns"),
    ScheduleEntry("spot-gate", "stranded_sleep_sweep", "40 */5 * * * *", "default", PRODUCTION_AND_STAGING,
                  description="StrandedSleepSweepJob: resume sessions asleep on a wake that can never fire, 5 a pass"),
    ScheduleEntry("spot-gate", "auth_unpark", "50 */15 * * * *", "default", ALL,
                  description="QuotaResetCheckerJob's un-park: resume priority sessions parked by an auth outage "
                              "once their account recovers, 5 a sweep, oldest first"),
    ScheduleEntry("spot-gate", "quota_calibration", "0 */15 * * * *", "default", ALL,
                  description="QuotaCapacityCalibrationJob: price each window in dollars from own spend ÷ pool utilization"),
    ScheduleEntry("spot-gate", "burn_rate_recompute", "0 */20 * * * *", "default", ALL,
                  description="BurnRateRecomputeJob: $/min per harness+model over the last 25 sessions of each"),
    ScheduleEntry("spot-gate", "usage_sampler", "30 */15 * * * *", "pollers", ALL,
                  description="ClaudeUsageSamplerJob: ask for the serving account and up to 2 stale ones (>60 min)"),
    ScheduleEntry("spot-gate", "record_pool_history", "0 * * * * *", "default", ALL,
                  description="The Quotas charts' minute: each window's pooled utilization, pacing curve, reserve and "
                              "capacity, the running / held / asleep counts, the holds, pauses and resumes since"),
    ScheduleEntry("spot-gate", "pool_history_retention", "45 */15 * * * *", "maintenance", ALL,
                  description="Fold the Quotas charts' minutes older than 7 days into quarter hours, drop quarter hours "
                              "older than 90 days, a bounded span a batch"),
    ScheduleEntry("sweeper", "outbox_prune", "20 */10 * * * *", "maintenance", ALL,
                  description="Delete relayed outbox rows and processed-message records older than 7 days"),
    ScheduleEntry("sweeper", "log_retention", "30 */10 * * * *", "maintenance", ALL,
                  description="LogRetentionJob: drop log partitions past their window (verbose 7 d, the rest 90 d) "
                              "and purge deleted sessions' lines, within 90 s"),
    ScheduleEntry("sweeper", "log_partitions", "0 5 * * * *", "maintenance", ALL,
                  description="Create each log class's day partitions a week ahead (after the deploy, never on "
                              "the boot path)"),
    # The disk sweeps run wherever a sweeper runs beside a disk, development included (seed 003: bin/dev
    # runs the stale cleanup hourly): what keeps a non-owning deployment off the deployed disk is the
    # fence on the path, not the environment list (a root inside the durable volume is deleted from
    # only in production and staging; a relocated one anywhere).
    ScheduleEntry("sweeper", "orphan_clone_sweep", "0 30 */6 * * *", "maintenance", ALL, per_host=True,
                  description="OrphanCloneFilesystemCleanupJob: reap tombstones, then up to 20 clone directories "
                              "no session row names, older than 48 h, oldest first, each through the guard; "
                              "5-minute budget"),
    ScheduleEntry("sweeper", "stale_clone_cleanup", "0 25 * * * *", "maintenance", ALL, per_host=True,
                  description="StaleCloneCleanupJob: reap tombstones, reap archived sessions' clones whose trash "
                              "deadline passed (adopting archives the trash pipeline never saw), and sweep "
                              "scratch/attachment directories of sessions whose row is gone (1 h age, 200 per "
                              "root); 5-minute budget"),
    # The trash pipeline is asked for on every archive and unarchive; the 30-second cadence (its
    # RETRY_WAIT) is what picks up a retry, and a request that was lost.
    ScheduleEntry("sweeper", "deferred_clone_cleanup", "*/30 * * * * *", "maintenance", ALL, per_host=True,
                  description="DeferredCloneCleanupJob: restore unarchived sessions' clones, then clean archived "
                              "ones: dirty check, bundle + filtered patch, the mangled-tree guard, delete through "
                              "the guard; 5 attempts 30 s apart, only exhaustion pages"),
    ScheduleEntry("sweeper", "empty_trash", "0 50 * * * *", "maintenance", ALL, per_host=True,
                  description="EmptyTrashJob: after the 4-day deadline, a session not reap-protected loses its "
                              "preserved artifacts, scratch, attachments and any clone left (through the guard); "
                              "5-minute budget"),
    ScheduleEntry("sweeper", "mangled_clone_report", "0 0 8 * * *", "maintenance", ALL, per_host=True,
                  description="MangledCloneReportJob: one WARN line of the clones the mass-deletion guard defused in "
                              "the 25 hours before the run started (INFO on a day with none)"),
    # Development never runs the orphan transcript sweep (it refuses even by hand): outside a
    # deployment ~/.claude/projects is a person's own Claude Code history.
    ScheduleEntry("sweeper", "orphan_transcript_sweep", "0 45 */6 * * *", "maintenance", PRODUCTION_AND_STAGING,
                  per_host=True,
                  description="OrphanTranscriptDirectoryCleanupJob: up to 1,000 transcript directories of gone clones "
                              "or /tmp cwds, untouched for 24 h (newest mtime inside), oldest first; live and "
                              "unknown kept; 5-minute budget"),
    ScheduleEntry("sweeper", "live_clone_integrity", "0 40 * * * *", "maintenance", ALL, per_host=True,
                  description="LiveCloneIntegrityJob: one ERROR line naming each live session whose clone lost its "
                              "git tree or agent subdirectory, and what is left in it; INFO when healthy"),
    ScheduleEntry("sweeper", "transcript_archive", "50 */10 * * * *", "maintenance", ALL, per_host=True,
                  description="TranscriptArchiveJob: zip up to 50 changed sessions' transcripts into the object "
                              "store, checkpointed; rebuild latest.zip; a backlog deferred at WARN"),
    ScheduleEntry("alerts", "outbox_prune", "30 */10 * * * *", "maintenance", ALL,
                  description="Delete relayed outbox rows and processed-message records older than 7 days"),
    ScheduleEntry("alerts", "health_records_prune", "40 */10 * * * *", "maintenance", ALL,
                  description="Delete job-run records older than 14 days and heartbeats older than a day; fold the "
                              "Health charts' lane minutes older than 7 days into quarter hours, drop those past 90"),
    ScheduleEntry("alerts", "queue_recovery_expiry", "0 * * * * *", "auth", ALL,
                  description="QueueRecoveryModeExpiryJob: lift queue recovery mode once its TTL has elapsed (actor "
                              "ttl; JetStream's pause deadline is the other path) and re-pause a demand-side "
                              "consumer created during the halt; on auth, the lane the mode never pauses"),
    ScheduleEntry("gateway", "readiness_probe", "*/30 * * * * *", "pollers", ALL,
                  description="Ping every service over NATS and publish who answered as zimmer_gateway_peer_up"),
)


def entries_for(service: str, env: Environment, schedule: tuple[ScheduleEntry, ...] = SCHEDULE) -> list[ScheduleEntry]:
    return [e for e in schedule if e.service == service and env in e.environments]


def resolved_schedule(schedule: tuple[ScheduleEntry, ...] = SCHEDULE) -> dict[str, dict[str, dict[str, str]]]:
    seen: set[str] = set()
    for e in schedule:
        if e.key in seen:
            raise ScheduleError(f"duplicate schedule entry {e.key}")
        seen.add(e.key)
    return {env.value: {e.key: {"cadence": e.cadence, "lane": e.lane, **({"per_host": "yes"} if e.per_host else {})}
                        for e in schedule if env in e.environments}
            for env in Environment}


if __name__ == "__main__":
    print(json.dumps(resolved_schedule(), indent=2, sort_keys=True))
