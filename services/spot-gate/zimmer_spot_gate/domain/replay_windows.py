"""The windows as the dry-run's replay reads them, call after call: each one's spot budget left in
the record and in the replay (`window_numbers`, the function the policy view shows it with), and
where a window reset: its pooled time to reset jumps up and its utilization falls. Pure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from zimmer_spot_gate.domain.gate import GateCall, Policy, WindowState, window_numbers
from zimmer_spot_gate.domain.model import Window
from zimmer_spot_gate.domain.replay_model import Left, ResetLeft

RESET_SLACK_MINUTES = 10.0  # a jump in time to reset larger than this (and a fall in utilization) is a reset


class WindowReadings:
    def __init__(self) -> None:
        self.last: dict[Window, tuple[datetime, WindowState, Left]] = {}

    def read(self, at: datetime, call: GateCall, tried: Policy, moved: Callable[[WindowState], WindowState],
             spent: dict[Window, float]) -> tuple[tuple[Left, ...], list[ResetLeft]]:
        """What each window of `call` has left in both histories (the replay's under `tried`, moved
        by `moved`), and the resets since the last call: there `spent`, the replay's difference in
        spend, starts again from nothing."""
        if call.windows is None:
            return (), []
        lefts, resets = [], []
        for w in call.windows:
            before = self.last.get(w.window)
            if before is not None:
                then, was, was_left = before
                elapsed = (at - then).total_seconds() / 60
                if w.minutes_to_reset > was.minutes_to_reset - elapsed + RESET_SLACK_MINUTES \
                        and w.utilization < was.utilization:
                    resets.append(ResetLeft(min(at, max(then, then + timedelta(minutes=was.minutes_to_reset))),
                                            was_left))
                    spent[w.window] = 0.0
            rec = window_numbers(w, call.policy, call.fleet, call.candidate)
            rep = window_numbers(moved(w), tried, call.fleet, call.candidate)
            left = Left(w.window, rec.calibrated, rec.left, rep.left, rec.utilization, rep.utilization)
            self.last[w.window] = (at, w, left)
            lefts.append(left)
        return tuple(lefts), resets
