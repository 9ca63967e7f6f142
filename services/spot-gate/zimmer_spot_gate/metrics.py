"""Spot-gate metrics: a series for every number the policy view shows."""

from __future__ import annotations

import contextlib
import logging

from prometheus_client import CollectorRegistry, Counter, Gauge

from zimmer_common.contracts.spot_policy import PolicyView

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

    def observe(self, view: PolicyView) -> None:
        for reason, n in view.held.items():
            self.held.labels(reason).set(n)
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
        self.max_sessions.set(view.max_sessions)
