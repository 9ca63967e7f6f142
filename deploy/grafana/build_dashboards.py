#!/usr/bin/env python3
"""Writes Zimmer's Grafana dashboards (deploy/grafana/dashboards/*.json) from the tables below.

    python3 deploy/grafana/build_dashboards.py          # rewrite the JSON files
    python3 deploy/grafana/build_dashboards.py --check  # exit 1 when a file differs from its table

One dashboard per bounded context (backlog, spot gate, sweeper, alerts and health, gateway) and
the overview (zimmer.json, uid `zimmer-overview`, as before). Each has rows, an `instance`
variable (the replicas of its scrape job; the sweeper's also a `host` variable, the label its disk
metrics carry) used by every query, and latency panels from the histograms
(`histogram_quantile` over `rate(..._bucket[5m])` by `le`). The files are committed;
tests/test_deploy.py checks they are this script's output, that every query names an exported
metric, and that every exported metric family is on some dashboard.

In an expression `{F}` stands for the dashboard's selector (`job="zimmer-backlog",
instance=~"$instance"`) and `{F,` for the selector followed by more matchers. Standard library
only (the deploy tests import it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}  # provisioning/datasources/prometheus.yml
WIDTH = 24


@dataclass
class Panel:
    title: str
    targets: list[tuple[str, str]]  # (expression, legend)
    unit: str = "short"
    description: str = ""
    kind: str = "timeseries"  # or "stat", "table"
    width: int = 8
    height: int = 8


@dataclass
class Row:
    title: str
    panels: list[Panel]


@dataclass
class Dashboard:
    file: str
    uid: str
    title: str
    job: str  # the scrape job's matcher: `job="zimmer-backlog"`
    description: str
    rows: list[Row]
    host_variable: bool = False
    tags: list[str] = field(default_factory=list)


def ts(title: str, unit: str, *targets: tuple[str, str], description: str = "", width: int = 8) -> Panel:
    return Panel(title, list(targets), unit, description, width=width)


def stat(title: str, unit: str, *targets: tuple[str, str], description: str = "", width: int = 8) -> Panel:
    return Panel(title, list(targets), unit, description, kind="stat", width=width, height=5)


def quantiles(metric: str, by: str = "", extra: str = "") -> list[tuple[str, str]]:
    """p50, p95 and p99 of a histogram, summed over the replicas (by `by` as well when given)."""
    keep = f"{by}, le" if by else "le"
    legend = "{{" + by + "}} " if by else ""
    selector = "{F," + extra + "}" if extra else "{F}"
    return [(f"histogram_quantile({q}, sum by ({keep}) (rate({metric}_bucket{selector}[5m])))", f"{legend}p{int(q * 100)}")
            for q in (0.5, 0.95, 0.99)]


def p95(metric: str, by: str, extra: str = "") -> tuple[str, str]:
    selector = "{F," + extra + "}" if extra else "{F}"
    return (f"histogram_quantile(0.95, sum by ({by}, le) (rate({metric}_bucket{selector}[5m])))",
            "{{" + by.replace(", ", "}} {{") + "}}")


def service_rows(service: str) -> list[Row]:
    """What every service exports (zimmer_common.metrics), for one service's dashboard."""
    return [
        Row("Replicas", [
            stat("Replicas up", "short", ("sum(up{F})", "up"), ("sum(zimmer_service_ready{F})", "ready"),
                 description="Scrape targets answering, and replicas that finished starting."),
            ts("Uptime by instance", "s", ("time() - max by (instance) (zimmer_service_start_time_seconds{F})",
                                          "{{instance}}")),
            ts("Build and heartbeats", "short", ("count by (version) (zimmer_service_info{F})", "version {{version}}"),
               ("sum by (instance) (rate(zimmer_heartbeats_total{F}[5m])) * 60", "heartbeats/min {{instance}}")),
        ]),
        Row("RPC", [
            ts("RPC requests / s by op and outcome", "reqps",
               ("sum by (op, outcome) (rate(zimmer_rpc_requests_total{F}[5m]))", "{{op}} {{outcome}}")),
            ts("RPC latency p50 / p95 / p99", "s", *quantiles("zimmer_rpc_seconds"),
               description=f"zimmer_rpc_seconds: the time {service} took to answer an RPC request."),
            ts("RPC latency p95 by op", "s", p95("zimmer_rpc_seconds", "op")),
            ts("Refused: busy and past deadline / s", "reqps",
               ("sum by (op) (rate(zimmer_rpc_busy_total{F}[5m]))", "busy {{op}}"),
               ("sum by (op) (rate(zimmer_rpc_expired_total{F}[5m]))", "expired {{op}}")),
            ts("Work in flight", "short", ("sum by (instance) (zimmer_rpc_inflight{F})", "rpc {{instance}}"),
               ("sum by (batcher) (zimmer_batch_pending{F})", "batch pending {{batcher}}")),
            ts("Batch size p50 / p95", "short", p95("zimmer_batch_size", "batcher"),
               ("histogram_quantile(0.5, sum by (batcher, le) (rate(zimmer_batch_size_bucket{F}[5m])))",
                "p50 {{batcher}}")),
        ]),
        Row("Outbox, dependencies and jobs", [
            ts("Outbox pending and relayed / s", "short",
               ("sum by (instance) (zimmer_outbox_pending{F})", "pending {{instance}}"),
               ("sum(rate(zimmer_outbox_relayed_total{F}[5m]))", "relayed / s")),
            ts("Dependencies up, failures / s", "short", ("min by (dependency) (zimmer_dependency_up{F})", "up {{dependency}}"),
               ("sum by (dependency) (rate(zimmer_dependency_failures_total{F}[5m]))", "failures {{dependency}}")),
            ts("Job runs / s by job and outcome", "ops",
               ("sum by (exported_job, outcome) (rate(zimmer_job_runs_total{F}[5m]))", "{{exported_job}} {{outcome}}"),
               ("max by (exported_job) (zimmer_job_last_run_failed{F})", "last failed {{exported_job}}")),
            ts("Job run duration p95 by job", "s", p95("zimmer_job_run_seconds", "exported_job"), width=16),
            ts("Jobs running by lane", "short", ("sum by (lane) (zimmer_jobs_running{F})", "{{lane}}")),
        ]),
    ]


GATEWAY = Dashboard("gateway.json", "zimmer-gateway", "Zimmer gateway", 'job="zimmer-gateway"',
                    "HTTP requests per route template and status (zimmer_http_*), the peers' readiness, and the "
                    "gateway's own plumbing.", [
    Row("HTTP", [
        ts("Requests / s by status class", "reqps",
           ("sum by (status) (rate(zimmer_http_requests_total{F}[5m]))", "{{status}}")),
        ts("Server errors (5xx) / all requests", "percentunit",
           ('sum(rate(zimmer_http_requests_total{F,status="5xx"}[5m])) / sum(rate(zimmer_http_requests_total{F}[5m]))',
            "5xx ratio")),
        ts("HTTP latency p50 / p95 / p99", "s", *quantiles("zimmer_http_request_duration_seconds"),
           description="zimmer_http_request_duration_seconds, every route."),
        ts("Requests / s by route template", "reqps",
           ("sum by (method, handler) (rate(zimmer_http_requests_total{F}[5m]))", "{{method}} {{handler}}"), width=12),
        ts("HTTP latency p95 by route template", "s", p95("zimmer_http_request_duration_seconds", "method, handler"),
           width=12),
        ts("Appends: p50 / p95 / p99", "s", *quantiles("zimmer_http_request_duration_seconds",
                                                      extra='handler="/api/v1/work_backlog_items",method="POST"'),
           description="POST /api/v1/work_backlog_items, the busiest route (served past the router)."),
        ts("4xx / s by route template", "reqps",
           ('sum by (handler) (rate(zimmer_http_requests_total{F,status="4xx"}[5m]))', "{{handler}}"), width=16),
    ]),
    Row("Peers", [
        ts("Peers answering the readiness probe", "short", ("min by (peer) (zimmer_gateway_peer_up{F})", "{{peer}}"),
           width=24),
    ]),
    Row("Live pages", [
        ts("Open live pages by page", "short", ("sum by (page) (zimmer_gateway_live_clients{F})", "{{page}}"),
           ("min(zimmer_gateway_live_feed_up{F})", "feed up"),
           description="Operator pages holding GET /live open (server-sent events), and whether each gateway's "
                       "ordered consumer on ZIMMER_EVENTS is subscribed (0: the pages say 'Live updates paused')."),
        ts("Notices and events / s", "ops",
           ("sum by (page) (rate(zimmer_gateway_live_notices_total{F}[5m]))", "notices {{page}}"),
           ("sum(rate(zimmer_gateway_live_events_total{F}[5m]))", "events read"),
           ("sum(rate(zimmer_gateway_live_renders_shared_total{F}[5m]))", "re-fetches answered by a shared render"),
           description="Events the live feed read, the 'changed' notices queued to pages (a burst is one), and "
                       "pages' re-fetches answered with another reader's render of the same address."),
        ts("Pages dropped for falling behind / s", "ops",
           ("sum by (page) (rate(zimmer_gateway_live_dropped_clients_total{F}[5m]))", "{{page}}"),
           description="A page whose notice queue filled is dropped (it reconnects and re-fetches), never "
                       "buffered without bound."),
    ]),
    *service_rows("the gateway"),
])

BACKLOG = Dashboard("backlog.json", "zimmer-backlog", "Zimmer backlog", 'job="zimmer-backlog"',
                    "The work backlog: its counts (the Issues page), appends, pulls, the liveness sweep and GitHub.", [
    Row("Work backlog", [
        ts("Counts by kind (the Issues page)", "short", ("max by (kind) (zimmer_backlog_count{F})", "{{kind}}")),
        ts("Rows by status", "short", ("max by (status) (zimmer_backlog_items{F})", "{{status}}")),
        ts("Appended, pulled, removed, held / h", "short",
           ("sum(increase(zimmer_backlog_appends_total{F}[1h]))", "appended"),
           ("sum by (via) (increase(zimmer_backlog_pulled_total{F}[1h]))", "pulled via {{via}}"),
           ("sum by (reason) (increase(zimmer_backlog_removals_total{F}[1h]))", "removed: {{reason}}"),
           ("sum(increase(zimmer_backlog_holds_total{F}[1h]))", "held")),
    ]),
    Row("Liveness and GitHub (the Issues page's GitHub side)", [
        ts("Stranded, awaiting a decision, held", "short",
           ("max by (figure) (zimmer_backlog_issues_view{F})", "{{figure}}"),
           ('max by (kind) (zimmer_backlog_count{F,kind=~"stranded|awaiting_decision|held"})', "{{kind}}")),
        ts("Oldest stranded row (days), since the last pass", "short",
           ("max(zimmer_backlog_stranded_oldest_age_seconds{F}) / 86400", "oldest stranded (days)"),
           ("(time() - max(zimmer_backlog_liveness_last_pass_timestamp_seconds{F})) / 86400", "since last pass (days)")),
        ts("Liveness passes, verdicts and pages / h", "short",
           ("sum by (outcome) (increase(zimmer_backlog_liveness_passes_total{F}[1h]))", "pass {{outcome}}"),
           ("sum by (verdict) (increase(zimmer_backlog_liveness_verdicts_total{F}[1h]))", "verdict {{verdict}}"),
           ("sum by (kind) (increase(zimmer_backlog_stranded_pages_total{F}[1h]))", "page {{kind}}"),
           ("sum(increase(zimmer_backlog_stranded_band_store_failures_total{F}[1h]))", "band store failures")),
        ts("GitHub: open issues per gated repository", "short",
           ("max by (repo) (zimmer_backlog_github_open_issues{F})", "{{repo}}"), width=12),
        ts("GitHub requests / s by api and outcome", "reqps",
           ("sum by (api, outcome) (rate(zimmer_backlog_github_requests_total{F}[5m]))", "{{api}} {{outcome}}"),
           width=12),
    ]),
    *service_rows("the backlog"),
])

SPOT = Dashboard("spot-gate.json", "zimmer-spot-gate", "Zimmer spot gate", 'job="zimmer-spot-gate"',
                 "The spot gate: the quota pool, budget and burn (the Quotas and Costs pages), sessions, decisions "
                 "and the ceiling.", [
    Row("Quota pool and budget (the Quotas page)", [
        ts("Pool utilization by window", "percentunit", ("max by (window) (zimmer_spot_pool_utilization{F})", "{{window}}")),
        ts("Budget left (fraction of the window), priority reserve", "percentunit",
           ("max by (window) (zimmer_spot_budget_left_fraction{F})", "left {{window}}"),
           ("max by (window) (zimmer_spot_priority_reserve_fraction{F})", "reserve {{window}}")),
        ts("Budget left and capacity ($, calibrated windows)", "currencyUSD",
           ("max by (window) (zimmer_spot_budget_left_dollars{F})", "left {{window}}"),
           ("max by (window) (zimmer_spot_window_capacity_dollars{F})", "capacity {{window}}")),
        ts("Fleet burn vs sustainable rate", "short",
           ("max by (window) (zimmer_spot_fleet_burn_rate{F})", "burn {{window}}"),
           ("max by (window) (zimmer_spot_sustainable_rate{F})", "sustainable {{window}}")),
        ts("Accounts in the pool and averaged", "short", ("max by (kind) (zimmer_spot_pool_accounts{F})", "{{kind}}")),
        ts("Gate open, work resumes in (s)", "short", ("max(zimmer_spot_gate_allowed{F})", "gate allows a spot session"),
           ("min(zimmer_spot_unblock_seconds{F})", "resumes in (s)")),
    ]),
    Row("Accounts (the Quotas page's account table)", [
        ts("Utilization per account: as read, and as the pool average counts it", "percentunit",
           ("max by (account, window) (zimmer_spot_account_utilization{F})", "{{account}} {{window}}"),
           ("max by (account, window) (zimmer_spot_account_counted_utilization{F})", "counted {{account}} {{window}}"),
           width=12),
        ts("Account status (1: the status last reported)", "short",
           ("max by (account, status) (zimmer_spot_account_status{F})", "{{account}} {{status}}"), width=12),
        ts("Reading age, resets and back in, per account", "s",
           ("max by (account) (zimmer_spot_account_reading_age_seconds{F})", "reading age {{account}}"),
           ("min by (account, window) (zimmer_spot_account_reset_seconds{F})", "resets {{account}} {{window}}"),
           ("min by (account) (zimmer_spot_account_back_seconds{F})", "back {{account}}"), width=12),
        ts("Windows: mean time to reset, time since calibrated", "s",
           ("max by (window) (zimmer_spot_window_reset_seconds{F})", "resets in {{window}}"),
           ("time() - max by (window) (zimmer_spot_window_calibrated_timestamp_seconds{F})", "since calibrated {{window}}"),
           width=12),
    ]),
    Row("Spend and burn (the Costs page)", [
        ts("Spend by window, by the account it draws on", "currencyUSD",
           ("max by (window) (zimmer_spot_spend_dollars{F})", "{{window}}"),
           ("max by (window, spends_against) (zimmer_spot_spend_by_account_dollars{F})", "{{window}} {{spends_against}}"),
           width=12),
        ts("Burn rate by harness and model ($/min)", "currencyUSD",
           ("max by (harness, model) (zimmer_spot_burn_rate_dollars_per_minute{F})", "list {{harness}} {{model}}"),
           ("max by (harness, model) (zimmer_spot_burn_rate_opus_dollars_per_minute{F})", "opus-priced {{harness}} {{model}}"),
           ("max(zimmer_spot_candidate_burn_rate{F})", "candidate"), width=12),
        stat("Unpriced models", "short", ("max(zimmer_spot_unpriced_models{F})", "unpriced"), width=24),
        ts("A session's spend when it ended, p50 / p95 / p99 by class", "currencyUSD",
           *quantiles("zimmer_spot_session_spend_dollars", by="class"), width=12,
           description="zimmer_spot_session_spend_dollars: the spend a session's page shows, observed once as it is "
                       "archived or fails (a histogram: a series per session would be unbounded)."),
        ts("Sessions ended per hour, and their mean spend, by class and end status", "short",
           ("sum by (class, status) (increase(zimmer_spot_session_spend_dollars_count{F}[1h]))", "ended {{class}} {{status}}"),
           ("sum by (class, status) (increase(zimmer_spot_session_spend_dollars_sum{F}[1h])) / sum by (class, status) "
            "(increase(zimmer_spot_session_spend_dollars_count{F}[1h]))", "mean $ {{class}} {{status}}"), width=12),
    ]),
    Row("Sessions and decisions", [
        ts("Running by class, held by reason", "short",
           ("max by (class) (zimmer_spot_running_sessions{F})", "running {{class}}"),
           ("max by (reason) (zimmer_spot_held_sessions{F})", "held {{reason}}"),
           ("max(zimmer_spot_running_slots{F})", "taking a slot"), ("max(zimmer_spot_max_sessions{F})", "max sessions")),
        ts("Decisions / s by reason", "ops", ("sum by (reason) (rate(zimmer_spot_decisions_total{F}[5m]))", "{{reason}}")),
        ts("Ceiling: asleep in the spot queue, paused and resumed per 5 min", "short",
           ("max by (reason) (zimmer_spot_paused_sessions{F})", "asleep {{reason}}"),
           ("sum by (outcome) (increase(zimmer_spot_ceiling_sessions_total{F}[5m]))", "{{outcome}}")),
        ts("Policy dry-runs per hour, by outcome", "short",
           ("sum by (outcome) (increase(zimmer_spot_dry_runs_total{F}[1h]))", "{{outcome}}"), width=12,
           description="POST /api/v1/spot_policy/dry_run, MCP preview_spot_policy and the Quotas page's preview: "
                       "served, or refused (a span starting after now)."),
        ts("Policy dry-run time p50 / p95 / p99", "s", *quantiles("zimmer_spot_dry_run_seconds"), width=12,
           description="zimmer_spot_dry_run_seconds: reading a span's records and replaying them."),
        ts("Quotas charts' history: points kept (flat once 90 days old)", "short",
           ("max by (resolution) (zimmer_chart_history_points{F})", "{{resolution}}"), width=24,
           description="spot_gate.pool_history: a point a minute for 7 days, then one per 15 minutes for 90 days "
                       "(docs/charts.md); about 18,000 per window at most"),
    ]),
    *service_rows("the spot gate"),
])

SWEEPER = Dashboard("sweeper.json", "zimmer-sweeper", "Zimmer sweeper", 'job="zimmer-sweeper"',
                    "The sweeper, one per runtime host: disk and clones (the Health page's Disk and clones panel), "
                    "trash, session logs and their retention.", [
    Row("Disk and clones", [
        ts("Free bytes by host and root", "bytes",
           ('min by (host, root) (zimmer_disk_free_bytes{F,host=~"$host"})', "free {{host}} {{root}}"),
           ('max by (host, root) (zimmer_disk_total_bytes{F,host=~"$host"})', "size {{host}} {{root}}")),
        ts("Reclaim unreachable, roots sweepable", "short",
           ('max by (host) (zimmer_disk_reclaim_unreachable{F,host=~"$host"})', "unreachable {{host}}"),
           ('min by (host, root) (zimmer_disk_root_sweepable{F,host=~"$host"})', "sweepable {{host}} {{root}}")),
        ts("Sweep runs / h by outcome, since each last finished", "short",
           ("sum by (exported_job, outcome) (increase(zimmer_disk_sweep_runs_total{F}[1h]))", "{{exported_job}} {{outcome}}"),
           ("time() - max by (exported_job) (zimmer_disk_sweep_last_run_timestamp_seconds{F})", "since {{exported_job}} (s)")),
        ts("Removed, bytes freed, tombstones reaped / h", "short",
           ("sum by (exported_job) (increase(zimmer_disk_sweep_removed_total{F}[1h]))", "removed {{exported_job}}"),
           ("sum by (exported_job) (increase(zimmer_disk_sweep_bytes_freed_total{F}[1h]))", "bytes freed {{exported_job}}"),
           ("sum by (exported_job) (increase(zimmer_disk_tombstones_reaped_total{F}[1h]))", "tombstones {{exported_job}}")),
        ts("Sweep counts / h", "short",
           ("sum by (exported_job, count) (increase(zimmer_disk_sweep_counted_total{F}[1h]))", "{{exported_job}} {{count}}")),
        ts("Guard: refusals, transcripts kept, compose teardowns / h", "short",
           ("sum by (kind) (increase(zimmer_disk_guard_refusals_total{F}[1h]))", "refused {{kind}}"),
           ("sum(increase(zimmer_disk_guard_transcripts_kept_total{F}[1h]))", "transcripts kept"),
           ("sum by (outcome) (increase(zimmer_disk_compose_teardowns_total{F}[1h]))", "teardown {{outcome}}")),
    ]),
    Row("Trash", [
        ts("Cleanups, restores, emptied / h", "short",
           ("sum by (outcome) (increase(zimmer_trash_cleanups_total{F}[1h]))", "cleanup {{outcome}}"),
           ("sum by (outcome) (increase(zimmer_trash_restores_total{F}[1h]))", "restore {{outcome}}"),
           ("sum by (outcome) (increase(zimmer_trash_emptied_total{F}[1h]))", "emptied {{outcome}}"),
           ("sum(increase(zimmer_trash_cleanup_attempt_failures_total{F}[1h]))", "attempts failed")),
        ts("Events taken, bytes preserved / h", "short",
           ("sum by (event) (increase(zimmer_trash_events_recorded_total{F}[1h]))", "{{event}}"),
           ("sum(increase(zimmer_trash_preserved_bytes_total{F}[1h]))", "bytes preserved")),
        ts("Git timeouts, mangled clones defused / h, daily report", "short",
           ("sum(increase(zimmer_trash_git_timeouts_total{F}[1h]))", "git timeouts"),
           ("sum(increase(zimmer_trash_mangled_clones_defused_total{F}[1h]))", "clones defused"),
           ("sum(increase(zimmer_trash_mangled_deletions_dropped_total{F}[1h]))", "deletions dropped"),
           ("max(zimmer_trash_mangled_report_sessions{F})", "report: sessions"),
           ("max(zimmer_trash_mangled_report_deletions{F})", "report: deletions")),
    ]),
    Row("Session logs (the Health page's Log Retention panel)", [
        ts("Rows by class (estimate), partitions, pending purges", "short",
           ("max by (class) (zimmer_logs_estimated_rows{F})", "{{class}}"), ("max(zimmer_logs_partitions{F})", "partitions"),
           ("max(zimmer_logs_pending_session_purges{F})", "pending session purges")),
        ts("Table and index size", "bytes", ("max(zimmer_logs_total_bytes{F})", "table with indexes"),
           ("max(zimmer_logs_index_bytes{F})", "indexes")),
        ts("Retention: oldest row (days), warning, since the last tick", "short",
           ("max by (class) (zimmer_logs_oldest_age_seconds{F}) / 86400", "oldest {{class}} (days)"),
           ("max(zimmer_logs_retention_warning{F})", "warning"),
           ("time() - max(zimmer_logs_retention_last_run_timestamp_seconds{F})", "since last tick (s)")),
        ts("Partitions dropped and failed, rows dropped and purged / h", "short",
           ("sum by (class) (increase(zimmer_logs_partitions_dropped_total{F}[1h]))", "dropped {{class}}"),
           ("sum by (class) (increase(zimmer_logs_partition_drop_failures_total{F}[1h]))", "failed {{class}}"),
           ("sum by (class) (increase(zimmer_logs_dropped_rows_total{F}[1h]))", "rows dropped {{class}}"),
           ("sum(increase(zimmer_logs_purged_rows_total{F}[1h]))", "rows purged")),
        ts("Ingest: lines / s by outcome, batch size, oldest unwritten (s)", "short",
           ("sum by (outcome) (rate(zimmer_logs_ingested_total{F}[5m]))", "{{outcome}}"),
           ("max(zimmer_logs_ingest_batch_size{F})", "batch size"),
           ("max(zimmer_logs_ingest_oldest_unwritten_seconds{F})", "oldest unwritten (s)")),
        ts("Ingest batch write p50 / p95 / p99", "s", *quantiles("zimmer_logs_ingest_batch_seconds")),
    ]),
    *service_rows("the sweeper"),
], host_variable=True)

ALERTS = Dashboard("alerts-health.json", "zimmer-alerts-health", "Zimmer alerts and health", 'job="zimmer-alerts"',
                   "The alerts service: pages and notifications, and the system health it reads (the Health page's "
                   "queue, cron, worker and NATS panels).", [
    Row("Health", [
        stat("Overall status (0 ok, 1 warning, 2 critical)", "short", ("max(zimmer_health_overall_status{F})", "overall"),
             ("max(zimmer_nats_cluster_status{F})", "NATS cluster"),
             ("max(zimmer_queue_recovery_mode_active{F})", "recovery mode"),
             width=12),
        ts("Health report time p50 / p95 / p99, since the last check", "s", *quantiles("zimmer_health_report_seconds"),
           ("time() - max(zimmer_health_monitor_last_check_timestamp_seconds{F})", "since last check"), width=12),
        ts("Queue verdict, JetStream readable", "short", ("max by (code) (zimmer_health_queue_verdict{F})", "verdict {{code}}"),
           ("min(zimmer_health_queue_readable{F})", "readable")),
        ts("Cron keys by state, overdue keys", "short", ("max by (state) (zimmer_cron_keys{F})", "{{state}}"),
           ("max by (key, state) (zimmer_cron_key_behind{F})", "behind {{key}} {{state}}")),
        ts("Service instances up and down, workers", "short",
           ("max by (service, state) (zimmer_service_instances{F})", "{{service}} {{state}}"),
           ("max(zimmer_workers_active{F})", "active"), ("max(zimmer_workers_registered{F})", "registered")),
    ]),
    Row("Queues", [
        ts("Health charts' history: lane points kept (flat once 90 days old)", "short",
           ("max by (resolution) (zimmer_chart_history_points{F})", "{{resolution}}"), width=24,
           description="alerts.lane_history: a point a minute per lane for 7 days, then one per 15 minutes for 90 "
                       "days (docs/charts.md); about 18,000 per lane at most"),
        ts("Ready and claimed by lane", "short", ("max by (lane) (zimmer_queue_ready{F})", "ready {{lane}}"),
           ("max by (lane) (zimmer_queue_claimed{F})", "claimed {{lane}}")),
        ts("Oldest ready and oldest execution by lane", "s",
           ("max by (lane) (zimmer_queue_oldest_ready_age_seconds{F})", "ready {{lane}}"),
           ("max by (lane) (zimmer_queue_oldest_claimed_age_seconds{F})", "running {{lane}}")),
        ts("Runs / h by lane, since anything finished, recovery mode lifts in", "short",
           ("max by (lane) (zimmer_queue_processing_rate_per_hour{F})", "{{lane}}"),
           ("min(zimmer_queue_seconds_since_last_finished{F})", "since last finished (s)"),
           ("clamp_min(max(zimmer_queue_recovery_mode_expires_at_seconds{F}) - time(), 0)", "recovery lifts in (s)")),
    ]),
    Row("NATS cluster", [
        ts("Stream replicas: current vs expected", "short",
           ("max by (stream, state) (zimmer_nats_stream_replicas{F})", "{{stream}} {{state}}")),
        ts("Streams with a leader", "short", ("min by (stream) (zimmer_nats_stream_has_leader{F})", "{{stream}}")),
        ts("Servers offline", "short", ("max(zimmer_nats_servers_offline{F})", "offline")),
    ]),
    Row("Alerts", [
        ts("Pages / s by level and source", "ops",
           ("sum by (level, source) (rate(zimmer_alert_pages_total{F}[5m]))", "{{level}} {{source}}")),
        ts("Notifications / s by sink and outcome", "ops",
           ("sum by (sink, outcome) (rate(zimmer_alert_notifications_total{F}[5m]))", "{{sink}} {{outcome}}")),
        ts("Issues not yet notified", "short", ("max(zimmer_alert_open_issues{F})", "open")),
        ts("The Health page's Alerts panel: newest issues shown, still paging", "short",
           ("max by (state) (zimmer_alert_newest_issues{F})", "{{state}}"), width=24,
           description="zimmer_alert_newest_issues: \"N of the M issues shown are still paging\" for the newest "
                       "10 issues (PANEL_ISSUES), set where the ledger changes and at every notifier pass."),
    ]),
    *service_rows("the alerts service"),
])

OVERVIEW = Dashboard("zimmer.json", "zimmer-overview", "Zimmer overview", 'job=~"zimmer-.*"',
                     "Every service at a glance; each bounded context has its own dashboard (the links above).", [
    Row("Fleet", [
        stat("Replicas up", "short", ("sum by (job) (up{F})", "{{job}}"), width=24,
             description="Scrape targets answering, per service (2 replicas each; one sweeper per runtime host)."),
        ts("Ready, instances up and down", "short", ("sum by (service) (zimmer_service_ready{F})", "ready {{service}}"),
           ("max by (service, state) (zimmer_service_instances{F})", "{{service}} {{state}}"), width=12),
        ts("Health: overall (0 ok, 1 warning, 2 critical), NATS cluster", "short",
           ("max(zimmer_health_overall_status{F})", "overall"), ("max(zimmer_nats_cluster_status{F})", "NATS cluster"),
           width=12),
    ]),
    Row("Requests", [
        ts("Gateway HTTP requests / s by status class", "reqps",
           ("sum by (status) (rate(zimmer_http_requests_total{F}[5m]))", "{{status}}")),
        ts("Gateway HTTP latency p50 / p95 / p99", "s", *quantiles("zimmer_http_request_duration_seconds")),
        ts("RPC requests / s by service and outcome", "reqps",
           ("sum by (job, outcome) (rate(zimmer_rpc_requests_total{F}[5m]))", "{{job}} {{outcome}}")),
        ts("RPC latency p95 by service", "s", p95("zimmer_rpc_seconds", "job"), width=12),
        ts("Refused: busy and past deadline / s", "reqps",
           ("sum by (job) (rate(zimmer_rpc_busy_total{F}[5m]))", "busy {{job}}"),
           ("sum by (job) (rate(zimmer_rpc_expired_total{F}[5m]))", "expired {{job}}"), width=12),
    ]),
    Row("Plumbing", [
        ts("Outbox pending", "short", ("sum by (job) (zimmer_outbox_pending{F})", "{{job}}")),
        ts("Dependencies up", "short", ("min by (job, dependency) (zimmer_dependency_up{F})", "{{job}} {{dependency}}")),
        ts("Job runs failed / h by service", "short",
           ('sum by (job) (increase(zimmer_job_runs_total{F,outcome="failed"}[1h]))', "{{job}}"),
           ("sum by (job) (zimmer_job_last_run_failed{F})", "last failed {{job}}")),
        ts("Job run duration p95 by service", "s", p95("zimmer_job_run_seconds", "job"), width=24),
    ]),
])

DASHBOARDS = [OVERVIEW, BACKLOG, SPOT, SWEEPER, ALERTS, GATEWAY]


def expand(expr: str, dashboard: Dashboard) -> str:
    selector = f'{dashboard.job},instance=~"$instance"'
    return expr.replace("{F,", "{" + selector + ",").replace("{F}", "{" + selector + "}")


def variable(name: str, query: str) -> dict[str, Any]:
    return {"name": name, "label": name, "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": f"{name}-variable"}, "definition": query, "refresh": 2,
            "includeAll": True, "allValue": ".*", "multi": True, "sort": 1,
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}}


def panel_json(panel: Panel, dashboard: Dashboard, panel_id: int, pos: dict[str, int]) -> dict[str, Any]:
    targets = [{"datasource": DATASOURCE, "refId": chr(ord("A") + i), "expr": expand(expr, dashboard),
                "legendFormat": legend, **({"instant": True} if panel.kind == "stat" else {})}
               for i, (expr, legend) in enumerate(panel.targets)]
    out: dict[str, Any] = {"id": panel_id, "type": panel.kind, "title": panel.title, "description": panel.description,
                           "datasource": DATASOURCE, "gridPos": pos, "targets": targets}
    if panel.kind == "stat":
        out["fieldConfig"] = {"defaults": {"unit": panel.unit}, "overrides": []}
        out["options"] = {"colorMode": "value", "graphMode": "none", "justifyMode": "auto", "textMode": "value_and_name",
                          "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    else:
        out["fieldConfig"] = {"defaults": {"unit": panel.unit, "custom": {"lineWidth": 1, "fillOpacity": 10}},
                              "overrides": []}
        out["options"] = {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                          "tooltip": {"mode": "multi", "sort": "desc"}}
    return out


def build(dashboard: Dashboard) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y = 0
    for row in dashboard.rows:
        panels.append({"id": len(panels) + 1, "type": "row", "title": row.title, "collapsed": False, "panels": [],
                       "gridPos": {"x": 0, "y": y, "w": WIDTH, "h": 1}})
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > WIDTH:
                x, y, line_height = 0, y + line_height, 0
            panels.append(panel_json(panel, dashboard, len(panels) + 1, {"x": x, "y": y, "w": panel.width, "h": panel.height}))
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    job = dashboard.job
    templating = [variable("instance", f"label_values(up{{{job}}}, instance)")]
    if dashboard.host_variable:
        templating.append(variable("host", f"label_values(zimmer_disk_free_bytes{{{job}}}, host)"))
    context = dashboard.uid.removeprefix("zimmer-")
    return {
        "uid": dashboard.uid, "title": dashboard.title, "description": dashboard.description,
        "tags": ["zimmer", context], "timezone": "browser", "schemaVersion": 39, "version": 1, "editable": False,
        "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "links": [{"title": "Zimmer dashboards", "type": "dashboards", "tags": ["zimmer"], "asDropdown": True,
                   "includeVars": True, "keepTime": True}],
        "templating": {"list": templating}, "annotations": {"list": []}, "panels": panels,
    }


def rendered() -> dict[str, str]:
    """Each dashboard file's name and its text, as this script writes it."""
    return {d.file: json.dumps(build(d), indent=2, ensure_ascii=False) + "\n" for d in DASHBOARDS}


def main(argv: list[str]) -> int:
    files = rendered()
    if "--check" in argv:
        stale = [name for name, text in files.items() if not (OUT / name).exists() or (OUT / name).read_text() != text]
        for name in stale:
            print(f"{OUT / name} is not this script's output: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for name, text in files.items():
        (OUT / name).write_text(text)
        panels = json.loads(text)["panels"]
        print(f"{name}: {sum(p['type'] != 'row' for p in panels)} panels in {sum(p['type'] == 'row' for p in panels)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
