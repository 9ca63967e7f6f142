"""The MCP surface at `/mcp`: one SDK server per requested group set, behind one ASGI dispatcher.

The SDK has no per-connection tool filtering, so every distinct group set gets its own
`MCPServer` holding exactly its tools: a tool outside the connection's groups is then neither
listed nor callable, because that server does not have it. A connection names its groups with
`?groups=a,b` or the header `X-Zimmer-Tool-Groups: a,b`; `core` is always in.

Servers are built on first use of their group set, not for the whole powerset up front. Each
server's `session_manager.run()` opens an anyio task group, and anyio requires a task group to
be exited by the task that entered it, so it cannot be entered from the request that first
needs it and left on an exit stack for the lifespan to close. Instead the surface owns one
task group for the life of the app (entered from the FastAPI lifespan via `running()`), and each
server gets a runner task in it that enters `run()`, reports started, and sleeps until shutdown
cancels it. A stateless manager has no per-session state, so starting it late is no different
from starting it at boot.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any, Final, get_type_hints

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, ValidationError, model_validator
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from zimmer_common import __version__
from zimmer_common.contracts.envelope import printable, refuse_unstorable, unstorable_strings
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_common.settings import Settings
from zimmer_gateway.auth import REALM_SCOPE_KEY, Realm, realm_of
from zimmer_gateway.edge import replay_body
from zimmer_gateway.mcp.registry import (
    CORE,
    INJECTED,
    KNOWN_GROUPS,
    REGISTRY,
    ToolDef,
    ToolRegistry,
    UnknownGroupsError,
    parse_groups,
)
from zimmer_gateway.problems import problem

# Modules that declare tools; imported when a surface is built (not at import time of this
# module) so they may import `zimmer_gateway.app` without an import cycle. Each feature adds
# its module here.
TOOL_MODULES: Final[tuple[str, ...]] = ("zimmer_gateway.mcp.system", "zimmer_gateway.mcp.spot_tools",
                                        "zimmer_gateway.mcp.wake_tools", "zimmer_gateway.mcp.backlog_tools",
                                        "zimmer_gateway.mcp.log_tools", "zimmer_gateway.mcp.health_report_tools",
                                        "zimmer_gateway.mcp.health_tools", "zimmer_gateway.mcp.alerts_tools",
                                        "zimmer_gateway.mcp.dry_run_tools")

GROUPS_HEADER: Final = "x-zimmer-tool-groups"
SESSION_HEADER: Final = "x-zimmer-session-id"
LOCAL_HOSTS: Final = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_BINDS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})
_CONTEXT_PARAM: Final = "mcp_context"

INSTRUCTIONS: Final = (
    "Tools of the Zimmer control plane. This connection sees the `core` tools plus the groups it "
    f"named with ?groups= or the X-Zimmer-Tool-Groups header (known: {', '.join(KNOWN_GROUPS)})."
)


def transport_security(settings: Settings, extra_hosts: Iterable[str] = ()) -> TransportSecuritySettings:
    """DNS-rebinding protection that admits the configured HTTP host and the loopback names.

    Any port is admitted (`host:*`): the bound port is only known after start when the
    configured one is 0, and the protection is about host names, not ports. A wildcard bind
    (0.0.0.0) says nothing about the name clients use: such deployments pass `extra_hosts`.
    """
    hosts = list(LOCAL_HOSTS)
    configured = settings.http_host.strip()
    if configured not in _WILDCARD_BINDS:
        hosts.append(f"[{configured}]" if ":" in configured and not configured.startswith("[") else configured)
    hosts.extend(h for h in extra_hosts if h)
    hosts = list(dict.fromkeys(hosts))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *(f"{h}:*" for h in hosts)],
        allowed_origins=[f"{scheme}://{h}{port}" for scheme in ("http", "https") for h in hosts for port in ("", ":*")],
    )


def describe_error(exc: ZimmerError) -> str:
    """The text of a tool error: code, message and, for `invalid`, the offending field(s)."""
    text = f"{exc.code.value}: {exc.message}"
    if exc.code is ErrorCode.INVALID:
        fields = _offending_fields(exc.details)
        if fields:
            text += f" (field: {', '.join(fields)})"
    elif exc.details:
        text += f" {json.dumps(exc.details, default=str, sort_keys=True)}"
    return text


def _offending_fields(details: dict[str, Any]) -> list[str]:
    # Two shapes reach the gateway: a domain check naming `field`/`fields`, or the bus's
    # contract check carrying pydantic `errors` with a `loc` each.
    if isinstance(details.get("field"), str):
        return [details["field"]]
    if isinstance(details.get("fields"), list):
        return [str(f) for f in details["fields"]]
    locs = [".".join(str(p) for p in e.get("loc", ())) for e in details.get("errors", []) if isinstance(e, dict)]
    return [loc for loc in dict.fromkeys(locs) if loc]


def bind(tool: ToolDef, service: Service) -> Any:
    """The callable the SDK registers for `tool`: its signature without the injected parameters.

    The SDK derives the input schema from `inspect.signature`, which honours `__signature__`,
    so `service` and `realm` are removed there and filled in at call time. A `Context`
    parameter is added so the call can see the HTTP request (and so the caller's realm).
    """
    sig = inspect.signature(tool.fn)
    if _CONTEXT_PARAM in sig.parameters:
        raise TypeError(f"tool {tool.name!r}: the parameter name {_CONTEXT_PARAM!r} is reserved")
    hints = get_type_hints(tool.fn, include_extras=True)
    wants = INJECTED & set(sig.parameters)
    params = [p.replace(annotation=hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY)
              for p in sig.parameters.values() if p.name not in INJECTED]
    params.append(inspect.Parameter(_CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY, annotation=Context))

    async def call(**kwargs: Any) -> Any:
        context: Context = kwargs.pop(_CONTEXT_PARAM)
        if "service" in wants:
            kwargs["service"] = service
        if "realm" in wants:
            kwargs["realm"] = _realm_of_call(context)
        if "acting_session" in wants:
            kwargs["acting_session"] = _declared_session(context)
        try:
            return await tool.fn(**kwargs)
        except ZimmerError as exc:
            # A ToolError is the SDK's "anticipated failure": an is_error result carrying this
            # text. Anything else would reach the model only as "Error executing tool".
            raise ToolError(describe_error(exc)) from exc
        except ValidationError as exc:  # the contract the tool built refused its arguments
            fields = [".".join(str(p) for p in e["loc"]) or "arguments" for e in exc.errors()]
            raise ToolError(f"invalid: {'; '.join(e['msg'] for e in exc.errors())} "
                            f"(field: {', '.join(dict.fromkeys(fields))})") from exc

    call.__name__ = call.__qualname__ = tool.name
    call.__doc__ = tool.description
    returns = hints.get("return", sig.return_annotation)
    call.__signature__ = sig.replace(parameters=params, return_annotation=returns)  # type: ignore[attr-defined]  # functions take __signature__; mypy does not know it
    call.__annotations__ = {p.name: p.annotation for p in params} | (
        {"return": hints["return"]} if "return" in hints else {})
    return call


def _refuse_unknown_arguments(server: MCPServer, name: str) -> None:
    """Hold tool arguments to the same line as every other request (`contracts.Request`): the
    SDK ignores arguments a tool does not declare and coerces types; refuse unknown arguments
    instead (nested objects are contract `Request`s, which refuse theirs), take no coercion, and
    refuse strings that cannot be stored, naming the argument. (The SDK offers no option for
    this: the argument model is swapped for a strict subclass.)"""
    registered = server._tool_manager.get_tool(name)  # noqa: SLF001 - no public accessor
    assert registered is not None
    loose = registered.fn_metadata.arg_model
    strict = type(f"{loose.__name__}Strict", (loose,), {
        "model_config": ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True),
        "_refuse_unstorable_strings": model_validator(mode="wrap")(classmethod(refuse_unstorable)),
    })
    registered.fn_metadata.arg_model = strict


def _declared_session(context: Context) -> int | None:
    """The session this connection speaks for (`X-Zimmer-Session-Id`, declared once, at connect)."""
    request = context.request_context.request
    value = (getattr(request, "headers", None) or {}).get(SESSION_HEADER)
    if value is None or not value.strip():
        return None
    if not value.strip().isdigit() or not 1 <= int(value.strip()) <= 2**63 - 1:
        raise ToolError(f"{ErrorCode.INVALID.value}: the {SESSION_HEADER} header must be a session id (field: "
                        f"{SESSION_HEADER})")
    return int(value.strip())


def _realm_of_call(context: Context) -> Realm:
    request = context.request_context.request
    realm = getattr(request, "scope", {}).get(REALM_SCOPE_KEY)
    if not isinstance(realm, Realm):  # only reachable if a request bypassed the dispatcher
        raise ToolError(f"{ErrorCode.UNAUTHORIZED.value}: no authenticated caller")
    return realm


def build_server(tools: Iterable[ToolDef], service: Service, security: TransportSecuritySettings) -> MCPServer:
    server: MCPServer = MCPServer(name="zimmer", title="Zimmer control plane", version=__version__,
                                  instructions=INSTRUCTIONS)
    for tool in tools:
        server.add_tool(bind(tool, service), name=tool.name, description=tool.description,
                        annotations=ToolAnnotations(read_only_hint=tool.read_only, destructive_hint=tool.destructive,
                                                    idempotent_hint=tool.idempotent, open_world_hint=False))
        _refuse_unknown_arguments(server, tool.name)
    # Called for its side effect: it creates the server's session manager, which the
    # dispatcher calls directly (the Starlette app it returns routes by path, which the
    # dispatcher has already done). Stateless + JSON: no session to pin to one replica.
    server.streamable_http_app(streamable_http_path="/", json_response=True, stateless_http=True,
                               transport_security=security)
    return server


_DECLARATIONS_CHECKED: set[ToolDef] = set()  # bound once in this process without an error


class McpSurface:
    """ASGI app for `/mcp`: authenticate, resolve the group set, hand over to its server."""

    def __init__(self, service: Service, *, registry: ToolRegistry = REGISTRY, extra_hosts: Iterable[str] = ()):
        for module in TOOL_MODULES:
            importlib.import_module(module)
        self.service = service
        self.registry = registry
        self.security = transport_security(service.settings, extra_hosts)
        self._servers: dict[frozenset[str], MCPServer] = {}
        self._lock = asyncio.Lock()
        self._tasks: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[McpSurface]:
        """Owns the servers' session managers; enter it from the app's lifespan."""
        # Bind every declared tool once so a broken declaration fails the start, not the
        # first connection that happens to ask for its group. Once per process: a declaration
        # does not change, and binding all of them took a third of a stack's start (every
        # tool's argument model and schema built again).
        unchecked = [tool for tool in self.registry.all() if tool not in _DECLARATIONS_CHECKED]
        if unchecked:
            build_server(unchecked, self.service, self.security)
            _DECLARATIONS_CHECKED.update(unchecked)
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                await self.server_for(frozenset({CORE}))  # the unscoped server is the common case
                yield self
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()
        # Session managers run once only; a restarted app builds fresh servers.
        self._servers.clear()

    async def server_for(self, groups: frozenset[str]) -> MCPServer:
        server = self._servers.get(groups)
        if server is not None:
            return server
        async with self._lock:
            if groups not in self._servers:
                if self._tasks is None:
                    raise ZimmerError(ErrorCode.UNAVAILABLE, "the MCP surface is not running")
                server = build_server(self.registry.for_groups(groups), self.service, self.security)
                await self._tasks.start(_serve, server)
                self._servers[groups] = server
            return self._servers[groups]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # streamable HTTP has no websocket form
            await send({"type": "websocket.close", "code": 1008})
            return
        request = Request(scope, receive)
        path = request.url.path
        realm = self._authenticate(request)
        if realm is None:
            header = request.headers.get("authorization")
            detail = "invalid bearer credential" if header else "missing bearer credential"
            await problem(401, detail, instance=path,
                          headers={"WWW-Authenticate": 'Bearer realm="zimmer"'})(scope, receive, send)
            return
        try:
            groups = parse_groups(",".join(request.query_params.getlist("groups")),
                                  request.headers.get(GROUPS_HEADER))
        except UnknownGroupsError as exc:
            await problem(422, str(exc), type_="urn:zimmer:error:invalid", instance=path, code="invalid",
                          field="groups", unknown_groups=exc.unknown,
                          known_groups=list(KNOWN_GROUPS))(scope, receive, send)
            return
        if request.method == "POST":
            # The body is already buffered and bounded (zimmer_gateway.edge). Strings that cannot
            # be stored are refused here as on REST (422 naming the field), whatever the message
            # they sit in; the SDK's parser would call a lone surrogate a parse error instead.
            body = await request.body()
            bad = _unstorable_in(body)
            if bad is not None:
                loc, why = bad
                await problem(422, f"{'.'.join(map(str, loc))} {why}", type_="urn:zimmer:error:invalid",
                              instance=path, code="invalid",
                              errors=[{"loc": ["body", *loc], "msg": why, "type": "unstorable_string"}]
                              )(scope, receive, send)
                return
            receive = replay_body(body, receive)
        try:
            server = await self.server_for(groups)
        except ZimmerError as exc:
            await problem(exc.http_status, exc.message, type_=f"urn:zimmer:error:{exc.code.value}", instance=path,
                          code=exc.code.value)(scope, receive, send)
            return
        # Tools that ask for `realm` read it from the request the SDK hands them.
        await server.session_manager.handle_request({**scope, REALM_SCOPE_KEY: realm}, receive, send)

    def _authenticate(self, request: Request) -> Realm | None:
        realm = request.scope.get(REALM_SCOPE_KEY)  # the edge middleware checked it already
        if isinstance(realm, Realm):
            return realm
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return realm_of(self.service.settings, token.strip())


def _unstorable_in(body: bytes) -> tuple[tuple[str | int, ...], str] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None  # not JSON: the SDK answers with its parse error
    for loc, why in unstorable_strings(message):
        return tuple(printable(p) if isinstance(p, str) else p for p in loc), why
    return None


async def _serve(server: MCPServer, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    async with server.session_manager.run():
        task_status.started()
        await anyio.sleep_forever()
