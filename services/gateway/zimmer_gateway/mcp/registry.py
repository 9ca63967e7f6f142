"""Declaring MCP tools in named groups (DESIGN §6).

A feature module declares each tool once, with the group it belongs to:

    @tool(group="work_backlog", read_only=False, destructive=False, idempotent=True)
    async def add_work_item(service: Service, title: str, priority: int = 3) -> WorkItem:
        "Add one item to the backlog."          # the docstring is the tool's description
        ...

or, without the decorator, `REGISTRY.add(ToolDef(name=..., group=..., ...))`.

The function's keyword arguments become the tool's input schema (the SDK validates them with
pydantic from the signature). Two parameter names are injected by the gateway instead of being
supplied by the caller: `service` (the gateway `Service`, for `service.bus`), `realm` (the
`Realm` of the caller's credential) and `acting_session` (the session the connection declared
with the `X-Zimmer-Session-Id` header, or None: provenance is stamped from the connection, never
taken from an argument). A `ZimmerError` raised by the function reaches the client
as a tool error result; see `server.py`.

A connection only sees the tools of `core` plus the groups it asks for, so which group a tool
sits in is the whole of its exposure: backlog writes never go in `core`.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

CORE: Final = "core"
# The one list of groups. A connection naming anything else is refused, so adding a group
# means adding it here (and saying in DESIGN §6 what belongs in it).
OPT_IN_GROUPS: Final[tuple[str, ...]] = ("work_backlog", "gate_decisions", "health", "sessions")
KNOWN_GROUPS: Final[tuple[str, ...]] = (CORE, *OPT_IN_GROUPS)

# Parameters the gateway fills in; they never appear in a tool's input schema.
INJECTED: Final = frozenset({"service", "realm", "acting_session"})

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

ToolFn = Callable[..., Awaitable[Any]]


class UnknownGroupsError(ValueError):
    """A connection (or a tool declaration) named groups that do not exist."""

    def __init__(self, unknown: Iterable[str]):
        self.unknown = sorted(set(unknown))
        super().__init__(f"unknown tool group(s): {', '.join(self.unknown)}; "
                         f"known groups: {', '.join(KNOWN_GROUPS)}")


@dataclass(frozen=True)
class ToolDef:
    """One MCP tool: what it is called, which group exposes it, and its behaviour hints.

    The hints become the MCP tool annotations. They are hints for clients, never security:
    exposure is decided by the group alone.
    """

    name: str
    group: str
    description: str
    fn: ToolFn
    read_only: bool
    destructive: bool
    idempotent: bool

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be snake_case ASCII, at most 64 characters")
        if self.group not in KNOWN_GROUPS:
            raise UnknownGroupsError([self.group])
        if not self.description.strip():
            raise ValueError(f"tool {self.name!r} needs a description: it is all a model reads about it")
        if not inspect.iscoroutinefunction(self.fn):
            raise TypeError(f"tool {self.name!r}: fn must be an async function")
        if self.read_only and self.destructive:
            raise ValueError(f"tool {self.name!r} cannot be both read-only and destructive")
        for param in inspect.signature(self.fn).parameters.values():
            # The SDK builds the input schema from named parameters only.
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
                raise TypeError(f"tool {self.name!r}: parameter {param.name!r} must be a plain keyword parameter")


class ToolRegistry:
    """The tools declared so far. Servers snapshot it when they are built."""

    def __init__(self) -> None:
        self._tools: dict[str, ToolDef] = {}

    def add(self, tool: ToolDef) -> ToolDef:
        # Names are unique across groups: a connection asking for several groups gets one
        # flat tool list, where two tools of one name could not both be called.
        if tool.name in self._tools and self._tools[tool.name] is not tool:
            raise ValueError(f"tool {tool.name!r} is already declared (group {self._tools[tool.name].group!r})")
        self._tools[tool.name] = tool
        return tool

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def tool(self, *, group: str, read_only: bool, destructive: bool, idempotent: bool,
             name: str | None = None, description: str | None = None) -> Callable[[ToolFn], ToolFn]:
        """Decorator form of `add`; name and description default to the function's."""

        def declare(fn: ToolFn) -> ToolFn:
            self.add(ToolDef(name=name or fn.__name__, group=group,
                             description=description or inspect.cleandoc(fn.__doc__ or ""), fn=fn,
                             read_only=read_only, destructive=destructive, idempotent=idempotent))
            return fn

        return declare

    def all(self) -> list[ToolDef]:
        return sorted(self._tools.values(), key=lambda t: (KNOWN_GROUPS.index(t.group), t.name))

    def for_groups(self, groups: Iterable[str]) -> list[ToolDef]:
        wanted = set(groups)
        return [t for t in self.all() if t.group in wanted]


REGISTRY: Final = ToolRegistry()
tool = REGISTRY.tool


def parse_groups(*specs: str | None) -> frozenset[str]:
    """The group set of a connection from comma-separated specs (query and/or header).

    `core` is always included; naming it is allowed. Unknown names raise rather than being
    dropped, so a typo in a client's configuration is seen at once instead of as missing tools.
    """
    named = {part.strip() for spec in specs if spec for part in spec.split(",")} - {""}
    unknown = named - set(KNOWN_GROUPS)
    if unknown:
        raise UnknownGroupsError(unknown)
    return frozenset(named | {CORE})
