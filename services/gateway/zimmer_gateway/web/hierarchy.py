"""The session hierarchy panel (seed 004 "Where you see it"): the session's line of work from its
root down to it, and its children, each node with its genesis · class pill, so "this whole
branch is spot" reads at a glance and an outlier stands out. Read with the RPCs REST uses
(`get_session` up the parents, `list_sessions` by parent), bounded: at most `DEPTH` ancestors and
`CHILDREN` children are drawn, and the panel says when there are more."""

from __future__ import annotations

from dataclasses import dataclass, field

from zimmer_common.bus import Bus
from zimmer_common.contracts import spot as c
from zimmer_common.errors import ZimmerError

DEPTH = 20  # ancestors drawn at most
CHILDREN = 50  # children drawn at most


@dataclass
class Hierarchy:
    ancestors: list[c.SessionView] = field(default_factory=list)  # the root first, the parent last
    more_above: bool = False  # the line goes higher than DEPTH
    missing_parent: int | None = None  # a parent that can no longer be read (deleted)
    children: list[c.SessionView] = field(default_factory=list)
    children_total: int = 0
    problem: str | None = None  # why the panel cannot be drawn whole


async def hierarchy(bus: Bus, session: c.SessionView) -> Hierarchy:
    found = Hierarchy()
    try:
        children = await bus.request(c.LIST_SESSIONS, c.SessionQuery(parent_session_id=session.id, limit=CHILDREN))
        found.children, found.children_total = children.sessions, children.total
        parent_id = session.parent_session_id
        seen = {session.id}
        while parent_id is not None and parent_id not in seen:
            if len(found.ancestors) >= DEPTH:
                found.more_above = True
                break
            try:
                parent = await bus.request(c.GET_SESSION, c.SessionRef(session_id=parent_id))
            except ZimmerError as exc:
                if exc.code.value != "not_found":
                    raise
                found.missing_parent = parent_id
                break
            seen.add(parent.id)
            found.ancestors.insert(0, parent)
            parent_id = parent.parent_session_id
    except ZimmerError as exc:
        found.problem = exc.message
    return found
