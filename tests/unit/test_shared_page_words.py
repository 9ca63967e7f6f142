"""The operator pages' shared words (issue 32 #6, zimmer_gateway.web.words): durations, cadences,
why a session waits, refusals named as the page names things, where Back goes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from zimmer_gateway.web.words import address_words, cron_words, duration, field_words, name_rows, origin, wait_pill

UNITS = {"s": 1, "min": 60, "h": 3600, "d": 86400}
SHAPE = re.compile(r"^(\d+ s|\d+ min|\d+ h( \d+ min)?|\d+ d( \d+ h)?)$")


def seconds_of(words: str) -> int:
    parts = words.split()
    return sum(int(n) * UNITS[unit] for n, unit in zip(parts[::2], parts[1::2], strict=True))


@given(st.floats(min_value=0, max_value=10 * 365 * 86400, allow_nan=False))
def test_a_duration_reads_in_at_most_two_units_and_never_says_more_than_it_was(seconds: float) -> None:
    words = duration(seconds)
    assert SHAPE.match(words), words
    said = seconds_of(words)
    assert said <= seconds  # cut, never rounded up
    assert seconds - said < UNITS[words.split()[-1]]  # and what was cut is less than the last unit shown


@given(st.integers(min_value=0, max_value=10**8), st.integers(min_value=0, max_value=10**8))
def test_a_longer_span_never_reads_shorter(a: int, b: int) -> None:
    low, high = sorted((a, b))
    assert seconds_of(duration(low)) <= seconds_of(duration(high))


def test_the_issues_example_and_the_edges() -> None:
    assert duration(4365 * 60) == "3 d"  # 4365 min: 3 days and 45 minutes
    assert duration(138 * 60) == "2 h 18 min"
    assert duration(59) == "59 s" and duration(60) == "1 min" and duration(3600) == "1 h"
    assert duration(86400 + 3 * 3600 + 59 * 60) == "1 d 3 h"
    assert duration(-5) == "0 s" and duration(None) == "—"


def test_the_systems_cadences_in_words() -> None:
    assert cron_words("0 */10 * * * *") == "Every 10 minutes"
    assert cron_words("*/15 * * * * *") == "Every 15 seconds"
    assert cron_words("0 7 * * * *") == "At 7 minutes past the hour"
    assert cron_words("0 30 */6 * * *") == "At 30 minutes past the hour, every 6 hours"
    assert cron_words("0 0 8 * * *") == "At 08:00 UTC"  # an hour of the day names its zone
    assert cron_words("*/10 * * * *") == "Every 10 minutes"  # five fields: minute first


def test_a_cadence_that_is_not_a_schedule_is_shown_as_it_is() -> None:
    for odd in ("every tuesday", "", "0 0 99 * * *", "@hourly", "1 2 3 4 5 6 7 8"):
        assert cron_words(odd) == odd


def test_every_documented_cadence_reads_as_words() -> None:
    """docs/jobs.md's table: each job's cadence comes out as words, none as the expression."""
    from pathlib import Path

    table = (Path(__file__).resolve().parents[2] / "docs" / "jobs.md").read_text()
    cadences = set(re.findall(r"^\| `[a-z-]+` \| `[a-z_]+` \| `([^`]+)` \|", table, re.M))
    assert len(cadences) > 10
    for cadence in cadences:
        words = cron_words(cadence)
        assert words != cadence and not re.search(r"[*/]", words), (cadence, words)


def view(**fields: object) -> SimpleNamespace:
    base = {"status": "waiting", "paused_until": None, "paused_by": None, "spot_pause_reason": None,
            "pause_sentence": None, "spot_hold_reason": None, "ever_started": False}
    return SimpleNamespace(**{**base, **fields})


def test_why_a_session_waits() -> None:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    assert wait_pill(view(status="running")) is None
    assert wait_pill(view(paused_until=at, spot_hold_reason="fleet_at_cap")) == wait_pill(view(paused_until=at))
    pill = wait_pill(view(paused_until=at))
    assert pill and (pill.kind, pill.words, pill.until) == ("paused_until", "paused until", at)
    pill = wait_pill(view(paused_by="spot_quota", spot_pause_reason="at_utilization_limit", pause_sentence="Resumes."))
    assert pill and (pill.kind, pill.words, pill.detail) == ("paused", "paused mid-run for quota headroom", "Resumes.")
    pill = wait_pill(view(paused_by="spot_quota", spot_pause_reason="user_spot_queue"))
    assert pill and (pill.kind, pill.words) == ("parked", "parked in the spot queue")
    pill = wait_pill(view(spot_hold_reason="at_utilization_limit"))
    assert pill and (pill.kind, pill.words) == ("held", "held: quota headroom")
    pill = wait_pill(view(spot_hold_reason="fleet_at_cap", ever_started=True))
    assert pill and pill.words == "next turn held: every session slot taken"
    assert wait_pill(view(status="archived", spot_hold_reason="fleet_at_cap")) is None


def test_refusals_name_rows_by_their_keys() -> None:
    names = {47: "zimmer#3"}
    assert name_rows("item 47 is started; only a queued item can be pinned", names) == \
        "zimmer#3 is started; only a queued item can be pinned"
    assert name_rows("work backlog item 47 does not exist", names) == "zimmer#3 does not exist"
    assert name_rows("item 52, a newer row, carries the same key", names) == \
        "another row, a newer row, carries the same key"
    assert name_rows("session 12 is archived", names) == "session 12 is archived"


def test_validation_errors_in_words() -> None:
    assert field_words({"type": "string_too_long", "ctx": {"max_length": 2000}, "input": "x" * 2500},
                       "Reason") == "Reason is too long: at most 2,000 characters (this is 2,500)."
    assert field_words({"type": "less_than_equal", "ctx": {"le": 2147483647}}, "Precedence") == \
        "Precedence must be at most 2,147,483,647."
    assert field_words({"type": "string_too_short", "ctx": {"min_length": 1}, "input": ""}, "Reason") == \
        "Reason is required."
    assert field_words({"type": "value_error", "msg": "Value error, not both"}, "Form") == "Form: not both"


def test_back_goes_to_the_page_a_form_came_from() -> None:
    assert origin("/issues/47/pin") == "/issues"
    assert origin("/sessions/5/precedence") == "/sessions/5"
    assert origin("/sessions/abc") == "/sessions"
    assert origin("/ranked/9/trash") == "/ranked"
    assert origin("/health/queued/discard") == "/health"
    assert origin("/signout") == "/" and origin("/issuesx") == "/"


def test_an_address_that_names_nothing_in_words() -> None:
    said = address_words({"loc": ("path", "session_id"), "type": "int_parsing", "input": "abc"})
    assert said.startswith("There is no session “abc”")
    said = address_words({"loc": ("query", "filter"), "type": "literal_error", "input": "bogus",
                          "ctx": {"expected": "'queue', 'all'"}})
    assert said == "“bogus” is not one of this page's choices for filter: 'queue', 'all'."


def test_a_sentences_instants_become_times_in_one_zone() -> None:
    from zimmer_gateway.web.words import with_times

    said = str(with_times("Work resumes at 2030-01-02T03:04:05Z; <b>then</b> 2030-01-02 05:00:00 UTC."))
    assert said.count("<time ") == 2 and "&lt;b&gt;" in said
    assert 'datetime="2030-01-02T03:04:05Z" title="2030-01-02 03:04:05 UTC" data-local>2030-01-02 03:04:05 UTC</time>' \
        in said
    assert str(with_times("no time here")) == "no time here" and str(with_times(None)) == ""


def test_issue_and_pr_references_become_links() -> None:
    from zimmer_gateway.web.words import issue_links, repository_of

    assert repository_of("https://github.com/acme/zimmer/issues/4") == "acme/zimmer"
    said = str(issue_links("pick #202 or zimmer#203 (acme/other#5, https://github.com/a/b/pull/9); x#1 <i>",
                           {"zimmer": "acme/zimmer"}, "acme/zimmer"))
    for href in ("acme/zimmer/issues/202", "acme/zimmer/issues/203", "acme/other/issues/5", "a/b/pull/9"):
        assert f'href="https://github.com/{href}"' in said
    assert "x#1" in said and "issues/1" not in said and "&lt;i&gt;" in said  # an unknown repository stays text
