"""GET /api/v1/sessions/{id}/transcript.zip and /api/v1/transcripts/latest.zip (issue 16): the
five services in-process on real PostgreSQL and NATS, the sweeper archiving a real transcript
directory into JetStream's object store, the gateway streaming it back over HTTP."""

from __future__ import annotations

import asyncio
import io
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest

from zimmer_common.budget import SweepBudget
from zimmer_common.contracts.clones import INGEST_CLONE, SESSION_CLONES, CloneReport, SessionClonesQuery
from zimmer_common.contracts.disk import session_transcript_object
from zimmer_common.contracts.envelope import EventEnvelope

OPERATOR = {"Authorization": "Bearer test-operator-token"}


@pytest.fixture
def stack_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The sweeper's roots under tmp_path (DiskSettings reads ZIMMER_SWEEPER_*)."""
    for name in ("clones", "projects"):
        (tmp_path / name).mkdir()
    monkeypatch.setenv("ZIMMER_SWEEPER_CLONES_DIR", str(tmp_path / "clones"))
    monkeypatch.setenv("ZIMMER_SWEEPER_TRANSCRIPTS_DIR", str(tmp_path / "projects"))
    monkeypatch.setenv("ZIMMER_SWEEPER_DURABLE_VOLUME", str(tmp_path / "durable-elsewhere"))
    return tmp_path


async def _session_with_transcript(http: httpx.AsyncClient, sweeper, base: Path) -> int:  # type: ignore[no-untyped-def]  # a test helper: fixture values are untyped
    created = await http.post("/api/v1/sessions", json={"title": "archived transcript", "start": False})
    assert created.status_code == 201, created.text
    sid = int(created.json()["session"]["id"])
    clone = base / "clones" / f"zimmer-main-{sid}-0a0b0c0d"
    clone.mkdir()
    report = CloneReport(session_id=sid, clone_path=str(clone), host=sweeper.settings.host)
    envelope = EventEnvelope(id=uuid.uuid4().hex, type="clone", version=1, source="runtime",
                             occurred_at=sweeper.clock.now(), data=report.model_dump(mode="json"))
    await sweeper.bus.publish(INGEST_CLONE, envelope.model_dump_json().encode(), msg_id=envelope.id)
    for _ in range(200):
        page = await sweeper.bus.request(SESSION_CLONES, SessionClonesQuery(scope="all", after_id=sid - 1, limit=1))
        if page.clones and page.clones[0].session_id == sid:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"spot-gate never stored session {sid}'s clone")
    transcript = base / "projects" / str(clone).replace("/", "-").replace(".", "-").replace("_", "-")
    (transcript / "s1" / "subagents").mkdir(parents=True)
    (transcript / "s1.jsonl").write_text('{"type": "user"}\n')
    (transcript / "s1" / "subagents" / "agent-1.jsonl").write_text('{"type": "assistant"}\n')
    return sid


async def test_a_sessions_archived_transcript_downloads_from_the_object_store(
        stack, http: httpx.AsyncClient, stack_setup: Path) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    services, url = stack
    sweeper = services["sweeper"]
    sid = await _session_with_transcript(http, sweeper, stack_setup)
    unarchived = (await http.post("/api/v1/sessions", json={"title": "never archived", "start": False})).json()

    before = await http.get(f"/api/v1/sessions/{sid}/transcript.zip")
    assert before.status_code == 404 and before.headers["content-type"] == "application/problem+json"
    await sweeper.app.transcripts.archive.run(SweepBudget(300, sweeper.clock))

    got = await http.get(f"/api/v1/sessions/{sid}/transcript.zip")
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/zip"
    assert got.headers["content-disposition"] == f'attachment; filename="session-{sid}-transcript.zip"'
    assert int(got.headers["content-length"]) == len(got.content)
    names = zipfile.ZipFile(io.BytesIO(got.content)).namelist()
    assert "session.json" in names and any(n.endswith("/s1/subagents/agent-1.jsonl") for n in names)

    missing = await http.get(f"/api/v1/sessions/{unarchived['session']['id']}/transcript.zip")
    assert missing.status_code == 404
    async with httpx.AsyncClient(base_url=url, timeout=15) as anonymous:
        assert (await anonymous.get(f"/api/v1/sessions/{sid}/transcript.zip")).status_code == 401

    # latest.zip: every session's zip in one, an operator's export.
    assert (await http.get("/api/v1/transcripts/latest.zip")).status_code == 403
    async with httpx.AsyncClient(base_url=url, headers=OPERATOR, timeout=15) as operator:
        latest = await operator.get("/api/v1/transcripts/latest.zip")
    assert latest.status_code == 200 and latest.headers["content-type"] == "application/zip"
    assert zipfile.ZipFile(io.BytesIO(latest.content)).namelist() == [session_transcript_object(sid)]
