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


def _election_refusals() -> list[BaseException]:
    from nats import errors as nats_errors
    from nats.js import errors as js_errors

    return [js_errors.ServiceUnavailableError(),
            js_errors.APIError(code=503, description="JetStream system temporarily unavailable"),
            js_errors.APIError(code=409, description="Leadership Change"),
            js_errors.NoStreamResponseError(), nats_errors.NoRespondersError()]


@pytest.mark.parametrize("exc", _election_refusals(), ids=repr)
def test_jetstream_refusals_of_an_election_are_the_buss_outage(exc: BaseException) -> None:
    # A stream-leader election: each consumer's fetch failed once a second with one of these, and
    # each was a WARNING "fetch failed" (105 lines in 6 s) instead of the bus's outage: one ERROR,
    # then a summary every 30 s.
    assert outage.classify(exc) == MESSAGE_BUS


def test_a_jetstream_refusal_of_the_request_itself_is_not_an_outage() -> None:
    from nats.js import errors as js_errors

    assert outage.classify(js_errors.NotFoundError(code=404, description="consumer not found")) is None
    assert outage.classify(js_errors.BadRequestError(code=400, description="bad request")) is None


def test_an_answer_ends_an_outage_the_connection_never_saw() -> None:
    # During an election the connection stays up, so no reconnect callback ends the outage: the
    # first answered publish or fetch does.
    outages = Outages()
    outages.answered(MESSAGE_BUS)  # nothing down: nothing to end
    assert outages.down() == []
    outages.report(_election_refusals()[0], where="consumer")
    assert outages.down() == [MESSAGE_BUS]
    outages.answered(DATABASE)
    assert outages.down() == [MESSAGE_BUS]
    outages.answered(MESSAGE_BUS)
    assert outages.down() == []


def test_an_outage_that_flaps_is_one_error_until_it_stays_away(monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    # A failover: consumers on a stream whose leader is being elected fail while others answer,
    # so the bus's outage ended and began again every second, an ERROR each time (17 in a minute
    # in one sweeper). Back for less than REOPEN_SECONDS and down again is the same outage.
    import logging

    now = [1000.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: now[0])
    bus = Outages().of(MESSAGE_BUS)
    with caplog.at_level(logging.INFO, logger="zimmer.outage"):
        for _ in range(10):
            bus.failed("ServiceUnavailableError")
            now[0] += 0.5
            bus.recovered()
            now[0] += 0.5
        now[0] += outage.REOPEN_SECONDS + 1
        bus.failed("connection refused")  # a new outage, long after: its own ERROR
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 2 and bus.down
