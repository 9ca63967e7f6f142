"""The failover suite's tick audit reads doubled, lost and unfinished ticks (it must be able to fail)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cluster_reads import TickRun, audit_ticks

T0 = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)  # on a minute: recheck_due fires at :00 :15 :30 :45


def _recheck(run_id: str, second: float, state: str = "finished") -> TickRun:
    return TickRun("spot-gate", "recheck_due", run_id, state, T0 + timedelta(seconds=second))


def _audit(runs: list[TickRun]):  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    only = [r for r in runs if r.job == "recheck_due"]
    audit = audit_ticks(only, T0, T0 + timedelta(seconds=48), timedelta(seconds=5))  # fires :00 :15 :30
    audit.missed = [m for m in audit.missed if "recheck_due" in m]  # other schedules have no runs here
    return audit


def test_one_run_per_fire_time_passes() -> None:
    audit = _audit([_recheck("1", 0.2), _recheck("2", 15.1), _recheck("3", 31.5)])
    assert audit.runs == 3 and not audit.doubled and not audit.missed and not audit.unfinished


def test_two_runs_for_one_fire_time_are_doubled() -> None:
    audit = _audit([_recheck("1", 0.2), _recheck("2", 0.9), _recheck("3", 15.1), _recheck("4", 30.3)])
    assert list(audit.doubled) == [f"spot-gate.recheck_due@{T0.isoformat()}"] and audit.doubled[
        f"spot-gate.recheck_due@{T0.isoformat()}"] == ["1", "2"]


def test_a_fire_time_without_a_run_is_missed_and_a_started_run_unfinished() -> None:
    audit = _audit([_recheck("1", 0.2), _recheck("3", 30.3, state="started")])
    assert audit.missed == [f"spot-gate.recheck_due@{(T0 + timedelta(seconds=15)).isoformat()}"]
    assert audit.unfinished and "run 3 started" in audit.unfinished[0]


def test_a_fire_time_inside_an_election_is_excused_not_missed() -> None:
    election = (T0 + timedelta(seconds=10), T0 + timedelta(seconds=20))
    only = [_recheck("1", 0.2), _recheck("3", 30.3)]
    audit = audit_ticks(only, T0, T0 + timedelta(seconds=48), timedelta(seconds=5), elections=[election])
    assert [m for m in audit.missed if "recheck_due" in m] == []
    assert audit.excused and f"spot-gate.recheck_due@{(T0 + timedelta(seconds=15)).isoformat()}" in audit.excused
