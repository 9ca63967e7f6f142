"""The gateway's first ASGI layer after the request metrics (`http_metrics`, outermost so that
the refusals below are counted and timed too): what must happen before any work, in this order.

1. Host names are compared case-insensitively: the Host header is lowercased (the MCP
   transport's DNS-rebinding check compares it exactly).
2. A query string value that cannot be stored (NUL, a lone surrogate) is a 422 naming the
   parameter.
3. `/api/` and `/mcp` need a valid bearer credential, checked from the headers alone: a caller
   without one gets 401 before a byte of its body is read.
4. The body is read here, bounded by `ZIMMER_MAX_BODY_BYTES`: a declared Content-Length over it
   is refused at once, and a streamed body is refused as soon as it passes it (413), so memory
   never grows past the limit whatever the client sends. The app then reads the buffered body.
5. The request runs under its deadline (now + `ZIMMER_RPC_TIMEOUT_SECONDS`), which every RPC it
   makes is budgeted from, and as its caller (the credential's realm, and the session a
   connection declares in `X-Zimmer-Session-Id`), which scopes its idempotency keys.

Refusals are RFC 9457 problem documents. A body left unread is not buffered: the server reads
and discards the rest after answering (closing the connection at once would reset it, and a
client still sending would lose the answer), and the keep-alive timeout bounds that.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from zimmer_common import deadline
from zimmer_common.contracts.envelope import printable, unstorable_strings
from zimmer_common.settings import Settings
from zimmer_gateway.auth import REALM_SCOPE_KEY, Realm, realm_of
from zimmer_gateway.problems import problem

CREDENTIAL_PREFIXES = ("/api/", "/mcp")
# The one API path that needs no credential: leaving queue recovery mode must work on the first
# try, even where the operator token was never set (seed 003; DESIGN §6). A credential sent along
# still names the caller.
UNGATED_PATHS = frozenset({"/api/v1/health/exit_queue_recovery_mode"})
SESSION_HEADER = b"x-zimmer-session-id"


class Edge:
    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings
        self.max_body = settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope["headers"] = [(k, v.lower()) if k == b"host" else (k, v) for k, v in scope["headers"]]
        headers = dict(scope["headers"])
        path = scope["path"]

        bad = _unstorable_query(scope.get("query_string", b""))
        if bad is not None:
            await _refuse(scope, receive, send, problem(
                422, f"query parameter {bad[0]} {bad[1]}", type_="urn:zimmer:error:invalid", instance=path,
                code="invalid", errors=[{"loc": ["query", bad[0]], "msg": bad[1], "type": "unstorable_string"}]))
            return

        realm: Realm | None = None
        if path.startswith(CREDENTIAL_PREFIXES):
            realm = _realm(self.settings, headers.get(b"authorization", b""))
            if realm is None and path not in UNGATED_PATHS:
                detail = "invalid bearer credential" if headers.get(b"authorization") else "missing bearer credential"
                await _refuse(scope, receive, send, problem(
                    401, detail, instance=path, type_="urn:zimmer:error:unauthorized", code="unauthorized",
                    headers={"WWW-Authenticate": 'Bearer realm="zimmer"'}))
                return
            if realm is not None:
                scope[REALM_SCOPE_KEY] = realm

        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await _refuse(scope, receive, send, self._too_large(path, declared.decode("latin-1")))
            return
        body = await _read_bounded(receive, self.max_body)
        if body is None:
            await _refuse(scope, receive, send, self._too_large(path, None))
            return

        caller = _caller(realm, headers.get(SESSION_HEADER))
        with deadline.use(time.time() + self.settings.rpc_timeout_seconds), deadline.as_caller(caller):
            await self.app(scope, replay_body(body, receive), send)

    def _too_large(self, path: str, declared: str | None) -> Any:
        said = f" (Content-Length {declared})" if declared else ""
        return problem(413, f"the request body is larger than {self.max_body:,} bytes{said}",
                       type_="urn:zimmer:error:too_large", instance=path, code="too_large",
                       details={"max_bytes": self.max_body})


def _realm(settings: Settings, header: bytes) -> Realm | None:
    scheme, _, token = header.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return realm_of(settings, token.strip())


def _caller(realm: Realm | None, session: bytes | None) -> str | None:
    if realm is None:
        return None
    if session and session.strip().isdigit():
        return f"{realm.value}/session:{int(session.strip())}"
    return realm.value


def _unstorable_query(raw: bytes) -> tuple[str, str] | None:
    """(parameter, why) for the first query value or name that cannot be stored."""
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="surrogateescape")
    except ValueError:
        return None  # unparseable: the route's own validation answers
    for name, value in pairs:
        for loc, why in unstorable_strings({name: value}):
            return printable(str(loc[0])), why.removeprefix("key ")
    return None


async def _read_bounded(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: the app sees an empty body and the disconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app `body` (already read) and then whatever `receive` gives."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: the disconnect, whenever it comes

    return replay


async def _refuse(scope: Scope, receive: Receive, send: Send, response: Any) -> None:
    await response(scope, receive, send)
