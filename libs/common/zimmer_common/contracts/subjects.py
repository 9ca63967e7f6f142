"""Subject names (DESIGN §3). All under `zimmer.`; built here and nowhere else."""

from __future__ import annotations

from enum import StrEnum

# Bounded contexts as they appear in subjects (spot-gate is `spot` on the wire, as in
# `zimmer.spot.rpc.request_turn`).
CONTEXTS: dict[str, str] = {
    "backlog": "backlog",
    "spot-gate": "spot",
    "sweeper": "sweeper",
    "alerts": "alerts",
    "gateway": "gateway",
}


# A host as a subject token (the sweeper's per-host jobs, a clone's host): lower case letters,
# digits, '-' and '_'.
HOST_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"


class Stream(StrEnum):
    EVENTS = "ZIMMER_EVENTS"
    RUNTIME = "ZIMMER_RUNTIME"
    INGEST = "ZIMMER_INGEST"
    JOBS = "ZIMMER_JOBS"


def stream_of(subject: str) -> Stream:
    """The stream that stores `subject` (streams.stream_configs: commands to runtimes, ingest, job
    ticks; every other subject published to JetStream is an event)."""
    for prefix, stream in (("zimmer.runtime.cmd.", Stream.RUNTIME), ("zimmer.ingest.", Stream.INGEST),
                           ("zimmer.jobs.", Stream.JOBS)):
        if subject.startswith(prefix):
            return stream
    return Stream.EVENTS


def host_ctx(ctx: str, host: str) -> str:
    """The context of a service's per-host jobs (the sweeper's disk sweeps, one sweeper per
    runtime host): their ticks, schedules and lane consumers carry the host, so every host's
    instance sweeps its own disk and no other host's tick reaches it."""
    return f"{ctx}-{host}"


HOST_SEPARATOR = "@"


def host_service(service: str, host: str) -> str:
    """How a per-host job's runs name their service (`sweeper@host-a`), so each host's key
    (`sweeper@host-a.orphan_clone_sweep`) is judged apart by cron freshness."""
    return f"{service}{HOST_SEPARATOR}{host}"


def split_host_service(name: str) -> tuple[str, str | None]:
    service, _, host = name.partition(HOST_SEPARATOR)
    return service, host or None


def ctx_of(name: str) -> str:
    """The subject context of a service name, or of a per-host one (`sweeper@h` → `sweeper-h`)."""
    service, host = split_host_service(name)
    ctx = CONTEXTS.get(service, service)
    return host_ctx(ctx, host) if host else ctx


def service_of_ctx(ctx: str) -> str | None:
    """The inverse of `ctx_of`: `spot` → `spot-gate`, `sweeper-h` → `sweeper@h`, unknown → None."""
    for service, known in sorted(CONTEXTS.items(), key=lambda kv: len(kv[1]), reverse=True):
        if ctx == known:
            return service
        if ctx.startswith(known + "-"):
            return host_service(service, ctx[len(known) + 1:])
    return None


def rpc_subject(ctx: str, op: str) -> str:
    return f"zimmer.{ctx}.rpc.{op}"


def event_subject(ctx: str, event: str) -> str:
    return f"zimmer.{ctx}.evt.{event}"


def job_subject(ctx: str, lane: str, job: str) -> str:
    return f"zimmer.jobs.{ctx}.{lane}.{job}"


def lane_filter(ctx: str, lane: str) -> str:
    return f"zimmer.jobs.{ctx}.{lane}.>"


# Schedule messages live beside the ticks they produce, under a prefix no lane consumer's
# filter (`zimmer.jobs.<ctx>.<lane>.>`) can match, so a work-queue consumer never eats one.
SCHEDULE_PREFIX = "zimmer.jobs.schedule"


def schedule_subject(ctx: str, job: str) -> str:
    return f"{SCHEDULE_PREFIX}.{ctx}.{job}"


def ingest_subject(kind: str) -> str:
    return f"zimmer.ingest.{kind}"


def runtime_command_subject(command: str) -> str:
    return f"zimmer.runtime.cmd.{command}"


PAGE_SUBJECT = "zimmer.alerts.cmd.page"
