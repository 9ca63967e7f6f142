"""Which zero a pull of zero is (seed 000 "spot_held: why a pull of zero is not always healthy";
issue 9 #4): every zero names itself, and a pull's sentence counts only what it started."""

from __future__ import annotations

from zimmer_backlog.domain.pullreport import PullFacts, sentence
from zimmer_common.contracts.backlog import Counts


def facts(in_flight: int = 0, spot_held: int = 0, queued: int = 0, **kw) -> PullFacts:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    counts = Counts(queued=queued, in_flight=in_flight, spot_held=spot_held, parked=0, claimed=in_flight)
    base = dict(counts=counts, asked_count=3, new=0, earlier=0, failed=0, failed_codes=(), removed_reasons=(),
                not_removed=0, candidates=0)
    return PullFacts(**{**base, **kw})


def test_the_seeds_own_sentence_for_a_full_ceiling_idle_behind_quota() -> None:
    f = facts(in_flight=20, spot_held=14, asked_count=0, wip_ceiling=20)
    assert sentence(f, "pacing_curve") == ("pulled 0 — 20 in flight against a ceiling of 20, but 14 of those are held "
                                           "at the spot gate on pacing_curve, so the fleet is idle behind quota rather "
                                           "than busy")


def test_a_full_ceiling_of_a_busy_fleet() -> None:
    f = facts(in_flight=20, spot_held=3, asked_count=0, wip_ceiling=20)
    assert sentence(f, "fleet_cap").endswith("3 of those are held at the spot gate on fleet_cap, so the fleet is busy")


def test_every_other_zero_names_itself() -> None:
    assert sentence(facts()) == "pulled 0 — the queue is empty; 0 in flight"
    assert sentence(facts(asked_count=None)) == "pulled 0 — none of the named keys is queued; 0 in flight"
    assert sentence(facts(removed_reasons=("issue_closed", "issue_closed"))) == (
        "pulled 0, removed 2 (2 issue_closed) — everything it took up was removed and nothing is left queued; 0 in flight")
    assert sentence(facts(failed=2, failed_codes=("unavailable", "refused"), candidates=2, queued=5)) == (
        "pulled 0 — 2 failed to start (1 refused, 1 unavailable); those marked retry_safe can be pulled again by key; "
        "0 in flight")
    assert sentence(facts(earlier=1, asked_count=None, in_flight=1)) == (
        "pulled 0 — 1 named was started by an earlier pull; 1 in flight")
    assert sentence(facts(in_flight=2, spot_held=2), "unknown").endswith(
        "2 of those are held at the spot gate (spot-gate did not say which ceiling holds)")


def test_a_pull_counts_what_it_started_not_what_an_earlier_pull_did() -> None:
    f = facts(new=1, earlier=2, in_flight=3, queued=4, not_removed=1)
    assert sentence(f) == "pulled 1, 2 started earlier, refused to remove 1 — 3 in flight, 4 still queued"
