"""The schedule is pinned rather than read (seed 003, "What runs where")."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from zimmer_common.schedule import ALL, SCHEDULE, ScheduleEntry, ScheduleError, next_fire_times, resolved_schedule
from zimmer_common.settings import Environment

ROOT = Path(__file__).resolve().parents[2]


def test_resolved_schedule_matches_the_checked_in_snapshot() -> None:
    """Changing a cadence or adding a job means regenerating the snapshot in the same commit:
    python -m zimmer_common.schedule > tests/fixtures/job_schedule.json"""
    snapshot = json.loads((ROOT / "tests/fixtures/job_schedule.json").read_text())
    assert resolved_schedule() == snapshot


def test_every_scheduled_job_appears_in_the_docs_table() -> None:
    doc = (ROOT / "docs/jobs.md").read_text()
    rows = {(m.group(1), m.group(2)) for m in re.finditer(r"^\|\s*`([\w-]+)`\s*\|\s*`(\w+)`\s*\|", doc, re.M)}
    missing = {(e.service, e.job) for e in SCHEDULE} - rows
    assert not missing, f"scheduled but undocumented in docs/jobs.md: {sorted(missing)}"


def test_test_environment_schedules_nothing() -> None:
    assert resolved_schedule()["test"] == {}


def test_staging_schedules_everything_production_does_and_development_nothing_more() -> None:
    resolved = resolved_schedule()
    assert resolved["staging"] == resolved["production"]  # NOT_ON_STAGING is empty
    assert set(resolved["development"]) <= set(resolved["production"])


def test_sub_minute_six_field_cron_fires_sub_minute() -> None:
    for entry in SCHEDULE:
        fields = entry.cadence.split()
        if len(fields) == 6 and fields[0].startswith("*/"):
            first, second = next_fire_times(entry.cadence, datetime(2026, 1, 1, tzinfo=UTC))
            assert (second - first).total_seconds() < 60, entry.key
    a, b = next_fire_times("*/30 * * * * *", datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))
    assert (a.second, (b - a).total_seconds()) == (30, 30)


@pytest.mark.parametrize("cadence", ["*/5 * * * *", "every 5m", "@every five", "61 * * * * *", ""])
def test_bad_cadences_are_refused(cadence: str) -> None:
    with pytest.raises(ScheduleError):
        ScheduleEntry("backlog", "x", cadence, "default", ALL)


def test_unknown_lane_is_refused() -> None:
    with pytest.raises(ScheduleError, match="lane"):
        ScheduleEntry("backlog", "x", "@every 1m", "fast", ALL)


def test_duplicate_entries_are_refused() -> None:
    entry = ScheduleEntry("backlog", "x", "@every 1m", "default", ALL)
    with pytest.raises(ScheduleError, match="duplicate"):
        resolved_schedule((entry, entry))


def test_environment_names_are_the_four_of_the_design() -> None:
    assert {e.value for e in Environment} == {"production", "staging", "development", "test"}


def test_jobs_that_spend_github_quota_run_in_production_and_staging_only() -> None:
    """Issue 12: the liveness sweep and the snapshot spend GitHub's API budget; development runs
    nothing that spends money or quota. Every entry names its environments (there is no default)."""
    resolved = resolved_schedule()
    for job in ("backlog.liveness_sweep", "backlog.github_snapshot"):
        assert job in resolved["production"] and job in resolved["staging"]
        assert job not in resolved["development"]
    with pytest.raises(TypeError):
        ScheduleEntry("backlog", "x", "@every 1m", "default")  # type: ignore[call-arg]  # a missing argument, on purpose
