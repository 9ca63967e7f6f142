"""The NATS cluster's health from JetStream's own account of each stream (issue 29 #4): nothing
watched NATS itself, so one of three nodes down (one failure from losing JetStream writes) read
"ok" everywhere.

Each stream's STREAM.INFO carries a cluster block from its leader: the leader's name and every
other replica with `current` (caught up), `active` (how long since the leader heard from it),
`offline` on some versions, and `lag`. A stream with
fewer current replicas than configured is under-replicated (warning: it still takes writes, one
more loss and it does not); a stream with no leader refuses writes (critical). A single-server
deployment's streams have one replica and no cluster block: always ok.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from zimmer_common.contracts.health import ClusterHealth, Status, StreamReplicas

# A replica the leader has not heard from for this long is offline, whether or not the server
# says so (`offline` comes from the server's own view of its peers, which notices a killed one only
# after minutes; `active` is nanoseconds since the leader last heard from the replica).
SILENT_NS = 10 * 1_000_000_000


def stream_replicas(stream: str, info: Mapping[str, Any]) -> StreamReplicas:
    """One stream's replicas from its STREAM.INFO answer."""
    expected = int((info.get("config") or {}).get("num_replicas") or 1)
    cluster = info.get("cluster") or {}
    leader = cluster.get("leader") or (None if expected > 1 else "local")
    term = _leader_for_ns(info, cluster)
    offline, lagging, current = [], [], 1 if leader else 0
    for replica in cluster.get("replicas") or []:
        name = str(replica.get("name", "?"))
        active = int(replica.get("active") or 0)
        if replica.get("current") and not replica.get("offline"):
            current += 1
        # A leader elected after a replica died never hears from it and reports `active` 0 ("never
        # seen", nats-server 2.11+): not heard from in a term longer than SILENT_NS is silence too.
        elif replica.get("offline") or active > SILENT_NS or (not active and term is not None and term > SILENT_NS):
            offline.append(name)
        else:
            lagging.append(name)
    return StreamReplicas(stream=stream, expected=expected, current=min(current, expected), leader=leader,
                          offline=sorted(offline), lagging=sorted(lagging))


def _leader_for_ns(info: Mapping[str, Any], cluster: Mapping[str, Any]) -> int | None:
    """How long the stream's leader has led, on the server's own clock (the answer's `ts` beside
    `leader_since`), in nanoseconds; None when the server does not say."""
    try:
        since = datetime.fromisoformat(str(cluster["leader_since"]))
        answered = datetime.fromisoformat(str(info["ts"]))
    except (KeyError, ValueError):
        return None
    return int((answered - since).total_seconds() * 1_000_000_000)


def cluster_health(streams: Sequence[StreamReplicas], unreadable: Mapping[str, str] | None = None) -> ClusterHealth:
    """The cluster's status: critical when a stream has no leader or could not be read (JetStream
    refusing to say is itself the symptom), warning when one is under-replicated, else ok."""
    unreadable = dict(unreadable or {})
    offline = sorted({name for s in streams for name in s.offline})
    # A server is down or not: one stream's leader noticing is enough for every stream it serves
    # (an idle stream's leader may not have missed it yet).
    streams = [s.model_copy(update={"offline": sorted(set(s.offline) | (set(s.lagging) & set(offline))),
                                    "lagging": [n for n in s.lagging if n not in offline]}) for s in streams]
    leaderless = [s.stream for s in streams if s.leader is None]
    short = [s for s in streams if s.leader is not None and s.current < s.expected]
    status: Status = "critical" if leaderless or unreadable else "warning" if short else "ok"
    parts = []
    if leaderless:
        parts.append(f"no leader for {', '.join(leaderless)}: their writes are refused")
    if unreadable:
        parts.append("; ".join(f"{name} unreadable ({why})" for name, why in sorted(unreadable.items())))
    if short:
        parts.append(", ".join(f"{s.stream} {s.current} of {s.expected} replicas current" for s in short))
    if offline:
        parts.append(f"offline: {', '.join(offline)}")
    summary = "; ".join(parts) if parts else (
        f"every stream has its leader and all its replicas current ({len(streams)} streams)")
    problem = "; ".join(f"{n}: {w}" for n, w in sorted(unreadable.items())) or None
    return ClusterHealth(readable=not unreadable, problem=problem, status=status, streams=list(streams),
                         servers_offline=offline, summary=summary)
