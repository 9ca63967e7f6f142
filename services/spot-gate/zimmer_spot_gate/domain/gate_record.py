"""A gate call as the decision log records it (`gate_decisions.inputs`, `gate_sweeps.inputs`), and
back: JSON-ready values only, every float as Python wrote it, so a call read back decides exactly
as the live gate decided (issue 32 #5, the policy dry-run). Pure."""

from __future__ import annotations

from typing import Any

from zimmer_spot_gate.domain.gate import Candidate, FleetState, GateCall, Policy, WindowState
from zimmer_spot_gate.domain.model import Window

VERSION = 1


def call_json(call: GateCall) -> dict[str, Any]:
    p = call.policy
    return {
        "v": VERSION,
        "policy": {"gating_enabled": p.gating_enabled, "max_sessions": p.max_sessions,
                   "reserve": {w.value: r for w, r in p.reserve.items()}},
        "windows": None if call.windows is None else [
            {"window": w.window.value, "utilization": w.utilization, "minutes_to_reset": w.minutes_to_reset,
             "capacity_dollars": w.capacity_dollars, "observed_rate": w.observed_rate,
             "accounts_rolled_over": w.accounts_rolled_over} for w in call.windows],
        "fleet": {"running_slots": call.fleet.running_slots, "burn": call.fleet.burn_dollars_per_minute},
        "candidate": {"burn": call.candidate.burn_dollars_per_minute,
                      "already_running": call.candidate.already_running},
        "accounts_averaged": call.accounts_averaged, "accounts_in_pool": call.accounts_in_pool,
        "failure": call.failure, "reserve_margin": call.reserve_margin,
    }


class UnreadableCall(ValueError):
    """A recorded call this version cannot read (another version, or a damaged row)."""


def call_of(data: dict[str, Any]) -> GateCall:
    try:
        if data.get("v") != VERSION:
            raise UnreadableCall(f"recorded by version {data.get('v')!r}, not {VERSION}")
        p, f, c = data["policy"], data["fleet"], data["candidate"]
        windows = None if data["windows"] is None else tuple(
            WindowState(Window(w["window"]), w["utilization"], w["minutes_to_reset"], w["capacity_dollars"],
                        w["observed_rate"], w["accounts_rolled_over"]) for w in data["windows"])
        return GateCall(
            Policy(p["gating_enabled"], {Window(k): v for k, v in p["reserve"].items()}, p["max_sessions"]),
            windows, FleetState(f["running_slots"], f["burn"]), Candidate(c["burn"], c["already_running"]),
            data["accounts_averaged"], data["accounts_in_pool"], data["failure"], data["reserve_margin"])
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, UnreadableCall):
            raise
        raise UnreadableCall(f"{type(exc).__name__}: {exc}") from None
