"""An answer that names no dependency names the outage that caused it (DESIGN §5): one that is
down now, or one that ended a moment ago (a deadline spent waiting on the database while it was
away passes just after it comes back: CI saw such a 503 name nothing)."""

from __future__ import annotations

import time

import pytest

from zimmer_common import outage
from zimmer_common.outage import DATABASE, MESSAGE_BUS, Outages

REFUSAL = {"retry_safe": True}


def test_nothing_down_names_nothing() -> None:
    assert Outages().naming(REFUSAL) == REFUSAL


def test_a_dependency_down_is_named() -> None:
    outages = Outages()
    outages.of(DATABASE).failed("connection refused")
    assert outages.naming(REFUSAL) == {**REFUSAL, "dependency": DATABASE}


def test_an_answer_that_names_its_dependency_keeps_it() -> None:
    outages = Outages()
    outages.of(DATABASE).failed("connection refused")
    assert outages.naming({"dependency": "backlog"}) == {"dependency": "backlog"}


def test_an_outage_that_just_ended_is_still_named_then_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    outages = Outages()
    database = outages.of(DATABASE)
    database.failed("connection refused")
    database.recovered()
    assert outages.naming(REFUSAL) == {**REFUSAL, "dependency": DATABASE}
    later = time.monotonic() + outage.AFTERMATH_SECONDS + 1
    monkeypatch.setattr(outage.time, "monotonic", lambda: later)
    assert outages.naming(REFUSAL) == REFUSAL


def test_one_down_now_comes_before_one_just_back() -> None:
    outages = Outages()
    outages.of(DATABASE).failed("connection refused")
    outages.of(DATABASE).recovered()
    outages.of(MESSAGE_BUS).failed("no servers")
    assert outages.naming(REFUSAL)["dependency"] == MESSAGE_BUS


def test_a_dependency_that_never_failed_is_not_named() -> None:
    outages = Outages()
    outages.of(DATABASE).recovered()  # the first connection: it was never down
    assert outages.naming(REFUSAL) == REFUSAL
