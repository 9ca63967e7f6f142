"""Spot-gate metrics: a series for every number the policy view shows."""

from __future__ import annotations

import contextlib
import logging
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from zimmer_common.contracts.spot_policy import CostsView, PolicyView
from zimmer_spot_gate.account_metrics import AccountMetrics

log = logging.getLogger("zimmer.spot_gate.metrics")
REFRESH_SECONDS = 15.0


class SpotMetrics:
    def __init__(self, registry: CollectorRegistry):
        r = registry
        self.decisions = Counter("zimmer_spot_decisions_total", "Spot gate decisions, by reason", ["reason"], registry=r)
        self.held = Gauge("zimmer_spot_held_sessions", "Sessions held at the spot gate, by hold reason", ["reason"], registry=r)
        self.running = Gauge("zimmer_spot_running_sessions", "Running sessions, by resolved class", ["class"], registry=r)
        self.utilization = Gauge("zimmer_spot_pool_utilization", "Pooled utilization per quota window (0-1)",
                                 ["window"], registry=r)
        self.left_fraction = Gauge("zimmer_spot_budget_left_fraction", "Spot budget left per window, as a fraction "
                                   "of the window", ["window"], registry=r)
        self.left_dollars = Gauge("zimmer_spot_budget_left_dollars", "Spot budget left per window in dollars "
                                  "(absent until the window is calibrated)", ["window"], registry=r)
        self.burn = Gauge("zimmer_spot_fleet_burn_rate", "Fleet burn per window ($/min calibrated, fraction/min before)",
                          ["window"], registry=r)
        self.sustainable = Gauge("zimmer_spot_sustainable_rate", "Sustainable rate per window: spot budget left / "
                                 "time left ($/min calibrated, fraction/min before)", ["window"], registry=r)
        self.allowed = Gauge("zimmer_spot_gate_allowed", "1 when the gate would admit a new spot session now", registry=r)
        self.max_sessions = Gauge("zimmer_spot_max_sessions", "Max sessions at once", registry=r)
        self.running_slots = Gauge("zimmer_spot_running_slots", "Sessions taking a slot of max sessions", registry=r)
        self.accounts = Gauge("zimmer_spot_pool_accounts", "Accounts in the pool, and how many the utilization "
                              "averaged (the rest have no reading)", ["kind"], registry=r)
        self.capacity = Gauge("zimmer_spot_window_capacity_dollars", "Calibrated capacity per window in dollars "
                              "(absent until the window is calibrated)", ["window"], registry=r)
        self.reserve = Gauge("zimmer_spot_priority_reserve_fraction", "The priority reserve per window (0-1)",
                             ["window"], registry=r)
        self.unblock = Gauge("zimmer_spot_unblock_seconds", "Seconds until work resumes when every account with a "
                             "reading is out and one says when (absent otherwise)", registry=r)
        self.spend = Gauge("zimmer_spot_spend_dollars", "Spend recorded in the last 5 hours / 7 days", ["window"],
                           registry=r)
        self.paused = Gauge("zimmer_spot_paused_sessions", "Sessions asleep in the spot queue, by pause reason "
                            "(at_utilization_limit: paused mid-run by the ceiling; user_spot_queue: parked by a person)",
                            ["reason"], registry=r)
        self.ceiling = Counter("zimmer_spot_ceiling_sessions_total", "Sessions the ceiling sweep paused or resumed",
                               ["outcome"], registry=r)
        self.burn_rates = Gauge("zimmer_spot_burn_rate_dollars_per_minute", "Burn rate per harness and model, at "
                                "the model's list price", ["harness", "model"], registry=r)
        self.burn_rates_opus = Gauge("zimmer_spot_burn_rate_opus_dollars_per_minute", "Burn rate per harness and "
                                     "model in the gate's currency (every Claude token at Opus list prices; Codex 0)",
                                     ["harness", "model"], registry=r)
        self.spend_by_account = Gauge("zimmer_spot_spend_by_account_dollars", "List-price spend in the last 5 hours / "
                                      "7 days by the account it draws on (claude, codex)", ["window", "spends_against"],
                                      registry=r)
        self.unpriced_models = Gauge("zimmer_spot_unpriced_models", "Models seen in the last 7 days or the burn rates "
                                     "that have no price of their own (priced at the dearest known price)", registry=r)
        self.dry_runs = Counter("zimmer_spot_dry_runs_total", "Policy dry-runs answered (served) or refused (a span "
                                "not before now)", ["outcome"], registry=r)
        self.dry_run_seconds = Histogram("zimmer_spot_dry_run_seconds", "Time to read and replay one policy dry-run",
                                         buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.candidate_burn = Gauge("zimmer_spot_candidate_burn_rate", "Opus-priced $/min of the new spot session the "
                                    "policy view decides for (a spawn naming no model)", registry=r)

        self.reset_seconds = Gauge("zimmer_spot_window_reset_seconds", "Mean seconds until each window resets over "
                                   "the accounts that recorded a reset (absent when none did)", ["window"], registry=r)
        self.calibrated_at = Gauge("zimmer_spot_window_calibrated_timestamp_seconds", "When each window's dollar "
                                   "capacity was last estimated (absent until calibrated)", ["window"], registry=r)
        # A session's spend as its page shows it, observed once when it ends (store.ended_spend): a label per
        # session would be unbounded, so a histogram by class and end status (issue 32 #2).
        self.session_spend = Histogram("zimmer_spot_session_spend_dollars", "Each session's list-price spend when "
                                       "it ended (archived or failed), by its class and end status",
                                       ["class", "status"], buckets=(0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 1000),
                                       registry=r)
        self.account = AccountMetrics(r)

    def session_ended(self, cls: str, status: str, dollars: float) -> None:
        self.session_spend.labels(cls, status).observe(dollars)

    def dry_run(self, outcome: str, seconds: float) -> None:
        self.dry_runs.labels(outcome).inc()
        if outcome == "served":
            self.dry_run_seconds.observe(seconds)

    def observe(self, view: PolicyView) -> None:
        for reason, n in view.held.items():
            self.held.labels(reason).set(n)
        for reason, n in view.paused.items():
            self.paused.labels(reason).set(n)
        for cls, n in view.running.items():
            self.running.labels(cls).set(n)
        for w in view.windows:
            self.utilization.labels(w.window).set(w.utilization)
            self.left_fraction.labels(w.window).set(w.spot_budget_left_fraction)
            if w.spot_budget_left_dollars is not None:
                self.left_dollars.labels(w.window).set(w.spot_budget_left_dollars)
            else:
                with contextlib.suppress(KeyError):  # not calibrated: no dollar series rather than $0.00
                    self.left_dollars.remove(w.window)
            self.burn.labels(w.window).set(w.fleet_burn)
            self.sustainable.labels(w.window).set(w.sustainable_rate)
        self.allowed.set(1 if view.decision.allowed else 0)
        if view.decided_for is not None:
            self.candidate_burn.set(view.decided_for.burn_per_minute)
        self.max_sessions.set(view.max_sessions)
        self.running_slots.set(view.running_slots)
        self.accounts.labels("in_pool").set(view.accounts_in_pool)
        self.accounts.labels("averaged").set(view.decision.accounts_averaged)
        for window, percent in view.reserve_percent.items():
            self.reserve.labels(window).set(percent / 100)
        for w in view.windows:
            if w.capacity_dollars is not None:
                self.capacity.labels(w.window).set(w.capacity_dollars)
            else:
                with contextlib.suppress(KeyError):
                    self.capacity.remove(w.window)
        for w in view.windows:
            self._set_or_remove(self.reset_seconds, w.window, w.minutes_to_reset * 60 if w.reset_recorded else None)
            self._set_or_remove(self.calibrated_at, w.window, w.calibrated_at.timestamp() if w.calibrated_at else None)
        self.account.observe(view)
        if view.unblock.state == "countdown" and view.unblock.at is not None:
            self.unblock.set(max(0.0, (view.unblock.at - datetime.now(UTC)).total_seconds()))
        else:
            self.unblock.set(float("nan"))  # nothing to count down to: NaN, which alerting treats as absent

    @staticmethod
    def _set_or_remove(gauge: Gauge, label: str, value: float | None) -> None:
        if value is not None:
            gauge.labels(label).set(value)
        else:
            with contextlib.suppress(KeyError):  # nothing recorded: no series rather than a made-up number
                gauge.remove(label)

    def observe_costs(self, costs: CostsView) -> None:
        self.spend.labels("five_hour").set(costs.spend_five_hour_dollars)
        self.spend.labels("seven_day").set(costs.spend_seven_day_dollars)
        for window, claude, codex in (("five_hour", costs.spend_five_hour_claude_dollars,
                                       costs.spend_five_hour_codex_dollars),
                                      ("seven_day", costs.spend_seven_day_claude_dollars,
                                       costs.spend_seven_day_codex_dollars)):
            self.spend_by_account.labels(window, "claude").set(claude)
            self.spend_by_account.labels(window, "codex").set(codex)
        for rate in costs.burn_rates:
            self.burn_rates.labels(rate.harness, rate.model).set(rate.dollars_per_minute)
            self.burn_rates_opus.labels(rate.harness, rate.model).set(rate.opus_dollars_per_minute)
        self.unpriced_models.set(sum(1 for m in costs.models if m.how == "unknown"))
