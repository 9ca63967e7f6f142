"""The Health page's index (issue 32 #6, as /issues has its counts): each panel's name and verdict
("Queues: warning"), linked to the panel, and whether the panel is ok. A long panel that is not ok
starts open; an ok one starts folded on a narrow screen (templates/panel.html `fold`, static
folds.js). Pure: it reads what health_page already has in hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PanelEntry:
    id: str  # the panel's section id, its link's fragment
    name: str  # as the index says it
    verdict: str | None  # what the index says after the name; None: a tool, no verdict
    ok: bool


def panel_index(*, overall: str, rows: list[dict[str, Any]], report: Any, recovery: Any, recovery_problem: str | None,
                alerts: Any, alerts_problem: str | None, lane_charts_problem: str | None) -> list[PanelEntry]:
    """Every panel in page order, each with its verdict in a word or two."""
    down = sum(1 for r in rows if not (r["up"] and r["ready"]))
    retention = report.log_retention.status if report.log_retention is not None else "unreadable"
    disk = report.disk.status if report.disk is not None else "unreadable"
    recovery_on = recovery is not None and recovery.active
    recovery_word = "unreadable" if recovery_problem else ("on" if recovery_on else "off")
    queues = "unreadable" if not report.queue.readable else report.verdict.status
    cron = "unreadable" if not report.cron.readable else report.cron.status
    w = report.workers
    workers_down = sum(n.registered - n.up for n in w.by_service.values())
    cluster = "not read" if report.cluster is None else report.cluster.status
    if alerts_problem or alerts is None:
        alerts_word = "unreadable"
    else:
        firing = sum(1 for i in alerts.issues if i.still_firing)
        alerts_word = f"{firing} paging" if firing else "ok"
    charts = "unreadable" if lane_charts_problem else queues
    return [
        PanelEntry("overall", "Overall", overall, overall == "ok"),
        PanelEntry("services", "Services", f"{down} down" if down else "ok", not down),
        PanelEntry("log-retention", "Log retention", retention, retention == "ok"),
        PanelEntry("disk", "Disk and clones", disk, disk == "ok"),
        PanelEntry("queue-recovery", "Queue recovery mode", recovery_word, recovery_word == "off"),
        PanelEntry("queued-messages", "Queued messages", None, True),
        PanelEntry("queues", "Queues", queues, queues == "ok"),
        PanelEntry("cron", "Cron freshness", cron, cron == "ok"),
        PanelEntry("workers", "Workers", f"{workers_down} down" if workers_down else "ok", not workers_down),
        PanelEntry("nats-cluster", "NATS cluster", cluster, cluster == "ok"),
        PanelEntry("alerts-ledger", "Alerts", alerts_word, alerts_word == "ok"),
        PanelEntry("lane-charts", "Lane charts", charts, charts == "ok"),
    ]
