"""Queued-message maintenance on real NATS and PostgreSQL (issue 15; seed 003 "Queued job
maintenance"): a scope is required, auth and schedule subjects are refused (by name and again in
the filter), the cap is checked before the count, a count mismatch refuses with the preview and
writes nothing, a discard's receipt, a reschedule delivers again later, and a message a worker
holds (ack pending) is never counted nor touched."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alerting import eventually  # type: ignore[import-not-found]  # a helper module beside the tests, on sys.path
from nats.js.api import AckPolicy, ConsumerConfig

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.service import build
from zimmer_common.clock import FrozenClock
from zimmer_common.contracts import health as h
from zimmer_common.contracts.alerts import LIST_ALERTS, AlertQuery
from zimmer_common.errors import ZimmerError
from zimmer_common.settings import Environment

WAITING = ["zimmer.jobs.demo.pollers.poll_a", "zimmer.jobs.demo.pollers.poll_b", "zimmer.jobs.demo.default.work",
           "zimmer.jobs.other.pollers.poll_c"]
PROTECTED = ["zimmer.jobs.demo.auth.login", "zimmer.jobs.schedule.demo.poll_a",
             "zimmer.jobs.demo.default.queue_recovery_expiry"]  # moved off auth: still never maintained


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime.now(UTC))


async def start(settings_factory: Any, clock: FrozenClock) -> Any:
    service = build(settings_factory(env=Environment.TEST), clock=clock,
                    alert_settings=AlertSettings(alert_check_seconds=3600, health_check_seconds=3600))
    await service.start()
    for subject in WAITING + PROTECTED:
        await service.bus.publish(subject, b'{"job": "x"}')
    return service


async def in_stream(service: Any, subject_filter: str = "zimmer.jobs.>") -> set[str]:
    info = await service.bus.js_api("STREAM.INFO.ZIMMER_JOBS", {"subjects_filter": subject_filter})
    return set(info["state"].get("subjects") or {})


async def refused(service: Any, spec: Any, req: Any) -> ZimmerError:
    with pytest.raises(ZimmerError) as caught:
        await service.bus.request(spec, req)
    return caught.value


async def test_scope_auth_and_schedule_subjects_are_refused(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await start(settings_factory, clock)
    try:
        assert (await refused(service, h.PREVIEW_QUEUED, h.QueuedScope())).code.value == "invalid"
        assert (await refused(service, h.DISCARD_QUEUED, h.QueuedMutation(expected_count=0))).code.value == "invalid"
        assert (await refused(service, h.PREVIEW_QUEUED, h.QueuedScope(lane="auth"))).code.value == "refused"
        # The recovery-mode expiry is refused by job as well as by lane (seed 003: "refused by class as
        # well, so moving either onto another queue does not quietly make it discardable").
        for subject in ("zimmer.jobs.demo.auth.login", "zimmer.jobs.schedule.>", "zimmer.jobs.schedule.demo.poll_a",
                        "zimmer.jobs.demo.default.queue_recovery_expiry"):
            err = await refused(service, h.DISCARD_QUEUED, h.QueuedMutation(subject=subject, expected_count=1))
            assert err.code.value == "refused", subject
        for subject in ("zimmer.runtime.cmd.x", "zimmer.jobs.>.x", "zimmer.jobs.de*mo.>"):
            assert (await refused(service, h.PREVIEW_QUEUED, h.QueuedScope(subject=subject))).code.value == "invalid"
        # A wildcard over everything still never reaches auth nor a schedule subject.
        preview = await service.bus.request(h.PREVIEW_QUEUED, h.QueuedScope(subject="zimmer.jobs.>"))
        assert preview.count == 4 and [c.name for c in preview.by_subject] == sorted(WAITING)
        assert {(c.name, c.count) for c in preview.by_lane} == {("pollers", 3), ("default", 1)}
        receipt = await service.bus.request(h.DISCARD_QUEUED, h.QueuedMutation(subject="zimmer.jobs.>",
                                                                               expected_count=4))
        assert receipt.count == 4 and await in_stream(service) == set(PROTECTED)
    finally:
        await service.stop()


async def test_a_count_mismatch_refuses_with_the_preview_and_writes_nothing(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await start(settings_factory, clock)
    try:
        err = await refused(service, h.DISCARD_QUEUED, h.QueuedMutation(lane="pollers", expected_count=2))
        assert err.code.value == "refused" and err.details["reason"] == "count_mismatch"
        preview = h.QueuedPreview.model_validate(err.details["preview"])
        assert preview.count == 3 and {c.name for c in preview.by_subject} == {
            "zimmer.jobs.demo.pollers.poll_a", "zimmer.jobs.demo.pollers.poll_b", "zimmer.jobs.other.pollers.poll_c"}
        assert await in_stream(service) == set(WAITING + PROTECTED)
        # Recovery is one retry with the preview's count; lane and subject together narrow it.
        receipt = await service.bus.request(h.DISCARD_QUEUED, h.QueuedMutation(
            lane="pollers", subject="zimmer.jobs.demo.>", expected_count=2, actor="ops"))
        assert receipt.action == "discard" and receipt.recoverable is False and receipt.count == 2
        assert [(c.name, c.count) for c in receipt.by_lane] == [("pollers", 2)] and receipt.skipped == []
        assert await in_stream(service, "zimmer.jobs.*.pollers.>") == {"zimmer.jobs.other.pollers.poll_c"}

        async def paged() -> bool:
            issues = (await service.bus.request(LIST_ALERTS, AlertQuery())).issues
            return any(i.title == "Queued jobs discarded" and "ops discarded 2" in i.last_message
                       and "zimmer.jobs.demo.pollers.poll_a" in i.last_message and i.level == "error"
                       for i in issues)
        await eventually(paged, "the discard's page")
    finally:
        await service.stop()


async def test_the_cap_is_checked_before_the_count(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await start(settings_factory, clock)
    try:
        await asyncio.gather(*(service.bus.publish(f"zimmer.jobs.bulk.default.j{n}", b"{}")
                               for n in range(h.MAINTENANCE_CAP + 1)))
        preview = await service.bus.request(h.PREVIEW_QUEUED, h.QueuedScope(subject="zimmer.jobs.bulk.>"))
        assert preview.over_cap and preview.count == h.MAINTENANCE_CAP + 1
        err = await refused(service, h.DISCARD_QUEUED, h.QueuedMutation(subject="zimmer.jobs.bulk.>",
                                                                         expected_count=h.MAINTENANCE_CAP))
        assert err.details["reason"] == "over_cap"
        assert len(await in_stream(service, "zimmer.jobs.bulk.>")) == h.MAINTENANCE_CAP + 1
    finally:
        await service.stop()


async def test_a_message_a_worker_holds_is_skipped(settings_factory, clock) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    service = await start(settings_factory, clock)
    try:
        await service.bus.js.add_consumer("ZIMMER_JOBS", ConsumerConfig(
            durable_name="jobs_demo_pollers", filter_subject="zimmer.jobs.demo.pollers.>",
            ack_policy=AckPolicy.EXPLICIT))
        sub = await service.bus.js.pull_subscribe_bind("jobs_demo_pollers", stream="ZIMMER_JOBS")
        [held] = await sub.fetch(1, timeout=2)  # delivered, never acked: a worker is running it
        preview = await service.bus.request(h.PREVIEW_QUEUED, h.QueuedScope(lane="pollers"))
        assert preview.count == 2 and [c.name for c in preview.claimed] == [held.subject]
        receipt = await service.bus.request(h.DISCARD_QUEUED, h.QueuedMutation(lane="pollers", expected_count=2))
        assert receipt.count == 2 and held.subject in await in_stream(service)
    finally:
        await service.stop()


async def test_reschedule_removes_the_messages_and_delivers_them_again_later(settings_factory) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # The frozen clock is a minute behind, so "1 minute from now" is about 2 s of real time.
    clock = FrozenClock(datetime.now(UTC) - timedelta(minutes=5))
    service = await start(settings_factory, clock)
    try:
        clock.advance((datetime.now(UTC) - timedelta(minutes=1) + timedelta(seconds=1) - clock.now()).total_seconds())
        receipt = await service.bus.request(h.RESCHEDULE_QUEUED, h.QueuedMutation(
            lane="default", expected_count=1, delay_minutes=1))
        assert receipt.action == "reschedule" and receipt.recoverable is True and receipt.count == 1
        assert receipt.deliver_at is not None and receipt.deliver_at > clock.now() + timedelta(minutes=1)
        assert "zimmer.jobs.demo.default.work" not in await in_stream(service)
        assert await in_stream(service, "zimmer.jobs.schedule.deferred.>") == {
            "zimmer.jobs.schedule.deferred.demo.default.work"}

        async def back() -> bool:
            return "zimmer.jobs.demo.default.work" in await in_stream(service)
        await eventually(back, "the rescheduled message back on its subject", tries=200)
        assert await in_stream(service, "zimmer.jobs.schedule.deferred.>") == set()  # the one-shot is gone
        err = await refused(service, h.RESCHEDULE_QUEUED, h.QueuedMutation(lane="default", expected_count=1))
        assert err.code.value == "invalid"  # no delay named
    finally:
        await service.stop()
