"""The health monitors' panels on the Health page (issue 15), in headless Chromium against a
running stack: the queue verdict and each lane read live from JetStream (work waiting on a lane
shows there), cron freshness, "N active / M registered" workers, and the alerts ledger; with the
alerts service stopped the page still renders and says the report could not be computed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from pageshots import accessibility_problems, screenshot

from zimmer_common.contracts.subjects import Stream, job_subject, lane_filter

OPERATOR = "test-operator-token"


async def sign_in(page: Any, base: str) -> None:
    await page.goto(f"{base}/health")
    await page.get_by_label("Operator token").fill(OPERATOR)
    await page.get_by_role("button", name="Sign in").click()
    assert page.url == f"{base}/health"


async def test_the_health_page_shows_lanes_cron_workers_and_the_ledger(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    bus = services["spot-gate"].bus
    await bus.js.add_consumer(Stream.JOBS.value, ConsumerConfig(
        durable_name="jobs_spot_inference", filter_subject=lane_filter("spot", "inference"),
        ack_policy=AckPolicy.EXPLICIT, deliver_policy=DeliverPolicy.ALL, max_ack_pending=2, ack_wait=30))
    for job in ("title_1", "title_2", "summary_1"):  # nobody fetches them: three ready on inference
        await bus.publish(job_subject("spot", "inference", job), json.dumps({"job": job}).encode())
    await services["backlog"].pager.report(title="Liveness sweep failed", fingerprint=["backlog", "liveness"],
                                           message="GitHub answered 502")
    page = await browser.new_page()
    await sign_in(page, base)
    # The report is asked of the alerts service with a 5 s bound; on a loaded CI box one read ran
    # past it and the page rightly said "cannot be read now": a few reloads, then the verdict.
    for _ in range(5):
        if await page.locator("[data-verdict]").count():
            break
        await page.reload()
    assert await page.locator("[data-verdict]").count() == 1, await page.locator("#queues").inner_text()
    inference = page.locator('#queues tr[data-lane="inference"]')
    assert await inference.locator("[data-ready]").get_attribute("data-ready") == "3"
    fold = await page.locator("#queues-fold").evaluate("d => [d.open, d.dataset.foldVerdict, !!d.zimmerToggled]")
    assert "0 / 2" in await inference.inner_text(), fold  # claimed / pool; a closed fold reads ''
    assert await page.locator("[data-ready-count]").get_attribute("data-ready-count") == "3"
    assert "inference" in await page.locator("[data-ready-count]").inner_text()  # the head of line's lane
    assert await page.locator('#queues tr[data-lane="events"]').count() == 1
    assert await page.locator("[data-cron-status]").get_attribute("data-cron-status") == "ok"
    # One server, every stream at one replica: the cluster panel reads whole (issue 29 #4).
    assert await page.locator("[data-cluster-status]").get_attribute("data-cluster-status") == "ok"
    assert await page.locator('#nats-cluster tr[data-stream="ZIMMER_EVENTS"] [data-replicas]').inner_text() == "1 of 1"
    active, registered = (int(n) for n in (await page.locator("[data-workers]").get_attribute("data-workers")
                                            or "0/0").split("/"))
    assert active >= 1 and registered >= active
    assert f"{active} active / {registered} registered" in await page.locator("#workers").inner_text()
    summary = await page.locator("[data-summary]").inner_text()
    assert summary.startswith("Overall:") and "Workers:" in summary
    for _ in range(100):  # the page reaches the ledger through the sender's outbox (10 s at most)
        if await page.locator("[data-alert-issue]").count():
            break
        await page.wait_for_timeout(100)
        await page.reload()
    assert "Liveness sweep failed" in await page.locator("#alerts-ledger").inner_text()
    assert await accessibility_problems(page) == []
    await screenshot(page, "health-monitors")


async def test_the_page_renders_when_the_alerts_service_is_down(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, base = stack
    await services["alerts"].stop()
    page = await browser.new_page()
    await sign_in(page, base)
    assert await page.locator("[data-overall]").get_attribute("data-overall") in ("critical", "degraded")
    assert "cannot be read now" in await page.locator("[data-queue-problem]").inner_text()
    assert "cannot be read now" in await page.locator("[data-cron-problem]").inner_text()
    assert "cannot be read now" in await page.locator("[data-alerts-problem]").inner_text()
    assert await accessibility_problems(page) == []


async def test_the_alerts_panel_offers_older_issues(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    """The panel shows the ten newest issues; the ledger pages by bytes (issue 27 #13), so older
    ones are a link away, each shown once."""
    services, base = stack
    for n in range(12):
        await services["backlog"].pager.report(title=f"Panel issue {n}", fingerprint=["panel", str(n)],
                                               message="m" * 2000, level="warning")
    page = await browser.new_page()
    await sign_in(page, base)
    first_page = page.url
    # The pages reach the ledger one by one through the sender's outbox: a page read while the
    # last one is still on its way offers it on neither page (newer than the link's cursor), so
    # read both pages again until all twelve have arrived (a CI run read eleven).
    for _ in range(100):
        await page.goto(first_page)
        if await page.locator("[data-next-page=alerts]").count():
            newest = await page.locator("[data-alert-issue] .alert-title").all_inner_texts()
            await page.locator("[data-next-page=alerts]").click()
            await page.wait_for_url("**alerts_before=**")
            older = await page.locator("[data-alert-issue] .alert-title").all_inner_texts()
            if sum(t.strip().startswith("Panel issue") for t in newest + older) >= 12:
                break
        await page.wait_for_timeout(100)
    assert len(newest) == 10
    titles = [title.strip() for title in newest + older]
    assert sorted(t for t in titles if t.startswith("Panel issue")) == sorted(f"Panel issue {n}" for n in range(12))
    assert len(titles) == len(set(titles))
    assert await page.get_by_role("link", name="Newest issues").count() == 1
    assert await accessibility_problems(page) == []


async def test_each_service_says_how_many_of_its_instances_are_up(stack, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    # Two kills read 10/10 workers 2.5 minutes later, and a graceful stop was never retired: now a
    # replica two beats late reads down, a stopped one is gone, and each service says "N of M up".
    from datetime import timedelta

    import httpx

    from zimmer_common.contracts.ops import HEARTBEAT, Heartbeat

    services, base = stack
    bus = services["spot-gate"].bus
    dead = Heartbeat(service="spot-gate", instance_id="spot-gate-killed", version="1", lanes=[], uptime_seconds=60,
                     at=services["spot-gate"].clock.now() - timedelta(seconds=40), interval_seconds=15.0)
    await bus.publish_event(HEARTBEAT, "heartbeat", dead, occurred_at=dead.at, event_id="heartbeat.test.killed")
    await services["sweeper"].stop()  # graceful: its last beat retires it
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as http:
        for _ in range(100):  # the heartbeats reach the alerts service through its consumer
            listed = (await http.get("/api/v1/services")).json()
            states = {(i["service"], i["instance_id"]): i["state"] for i in listed["instances"] or []}
            if ("spot-gate", "spot-gate-killed") in states and not any(s == "sweeper" for s, _ in states):
                break
            await asyncio.sleep(0.1)
    assert states[("spot-gate", "spot-gate-killed")] == "down"
    assert states[("spot-gate", services["spot-gate"].settings.instance_id)] == "up"
    assert listed["instances_up"]["spot-gate"] == {"up": 1, "registered": 2}
    assert "sweeper" not in listed["instances_up"]
    page = await browser.new_page()
    await sign_in(page, base)
    assert await page.locator('[data-service-instances="spot-gate"]').inner_text() == "1 of 2 spot-gate instances up"
    assert "bad" in (await page.locator('[data-service-instances="spot-gate"]').get_attribute("class") or "")
    assert await page.locator('tr[data-instance="spot-gate-killed"] [data-state]').inner_text() == "down"
    assert await page.locator('[data-service-instances="sweeper"]').count() == 0
    assert await accessibility_problems(page) == []
