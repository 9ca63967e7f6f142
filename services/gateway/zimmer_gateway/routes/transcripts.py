"""Archived transcripts (issue 16; seed 003's TranscriptArchiveJob): a session's transcript zip and
latest.zip, streamed from JetStream's object store, where each host's sweeper puts them (DESIGN §4:
a file any gateway replica serves lives there, not on one replica's disk). The object store is the
one read here that is not an RPC: the bytes are the object, and no service needs to see them pass.

Who may read: a session's zip needs any credential, as its timeline does (the fleet key reads every
session's records; an agent triaging a sibling session needs its transcript more than anyone).
latest.zip, every session's at once, is an operator's export: no agent needs the whole archive in
one download, and on the fleet key it would be a multi-gigabyte read any session could start.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse
from nats.js import JetStreamContext, api

from zimmer_common import objects
from zimmer_common.contracts.disk import LATEST_OBJECT, TRANSCRIPT_BUCKET, session_transcript_object
from zimmer_common.errors import ErrorCode, ZimmerError, unavailable
from zimmer_common.outage import MESSAGE_BUS
from zimmer_gateway.auth import authenticated, operator_only
from zimmer_gateway.routes.common import BusDep, SessionIdPath, problem_responses

router = APIRouter()
log = logging.getLogger("zimmer.gateway.transcripts")

ZIP_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}},
          "description": "The zip, streamed (Content-Length is its size; a shorter body is a broken download)"}}


async def _object(js: JetStreamContext, name: str, missing: str) -> api.ObjectInfo:
    try:
        found = await objects.find(js, TRANSCRIPT_BUCKET, name)
    except Exception as exc:  # noqa: BLE001 - JetStream did not answer: nothing to serve, retry later
        raise unavailable(MESSAGE_BUS, f"the transcript archive could not be read ({type(exc).__name__})") from None
    if found is None:
        raise ZimmerError(ErrorCode.NOT_FOUND, missing)
    return found[1]


async def _stream(js: JetStreamContext, info: api.ObjectInfo) -> AsyncIterator[bytes]:
    try:
        async for chunk in objects.chunks(js, TRANSCRIPT_BUCKET, info):
            yield chunk
    except Exception:
        # The status line is gone already: a short body against Content-Length tells the client.
        log.warning("transcript download cut short", extra={"fields": {"object": info.name}}, exc_info=True)
        raise


def _zip(js: JetStreamContext, info: api.ObjectInfo, filename: str) -> StreamingResponse:
    return StreamingResponse(_stream(js, info), media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{filename}"', "Content-Length": str(info.size or 0),
        "Cache-Control": "no-store"})


@router.get("/api/v1/sessions/{session_id}/transcript.zip", tags=["sessions"], dependencies=[Depends(authenticated)],
            summary="A session's archived transcripts, as a zip", response_class=StreamingResponse,
            responses={**ZIP_RESPONSE, **problem_responses(404)})
async def session_transcript(session_id: SessionIdPath, bus: BusDep) -> StreamingResponse:
    """Every transcript directory of the session's clone (its own and its agent subdirectory's),
    subagent transcripts included, with a session.json, as the archive last stored them: the
    archive runs every 10 minutes on the host holding the clone, so the newest turns may not be in
    it yet. 404 when no archive exists (none made yet, or the session was deleted)."""
    return await transcript_zip(bus.js, session_id)


async def transcript_zip(js: JetStreamContext, session_id: int) -> StreamingResponse:
    """The session's transcript zip as a download (this route's, and the session page's link)."""
    info = await _object(js, session_transcript_object(session_id),
                         f"no transcript archive for session {session_id}: none made yet (the archive runs every 10 "
                         "minutes), or no such session (never created, or deleted)")
    return _zip(js, info, f"session-{session_id}-transcript.zip")


async def transcript_info(js: JetStreamContext, session_id: int) -> api.ObjectInfo | None:
    """The archive's description (size, when stored), or None when there is none yet; raises
    `unavailable` when JetStream does not answer (the session page then says so)."""
    try:
        found = await objects.find(js, TRANSCRIPT_BUCKET, session_transcript_object(session_id))
    except Exception as exc:  # noqa: BLE001 - JetStream did not answer: the page says the archive cannot be read
        raise unavailable(MESSAGE_BUS, f"the transcript archive could not be read ({type(exc).__name__})") from None
    return None if found is None else found[1]


@router.get("/api/v1/transcripts/latest.zip", tags=["sessions"], dependencies=[Depends(operator_only)],
            summary="Every archived session's transcripts in one zip (operator)", response_class=StreamingResponse,
            responses={**ZIP_RESPONSE, **problem_responses(403, 404)})
async def latest_transcripts(bus: BusDep) -> StreamingResponse:
    """latest.zip: `sessions/<id>.zip` for every archived session, rebuilt whenever an archive
    changed. 404 before the first one is built."""
    info = await _object(bus.js, LATEST_OBJECT, "latest.zip has not been built yet")
    return _zip(bus.js, info, "zimmer-transcripts-latest.zip")
