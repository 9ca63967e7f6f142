"""Reading every session a page shows (issue 27 #13): one `list_sessions` answer carries only the
sessions that fit one bus message, so a page that shows a whole list (the Ranked view's sections,
the status pills of the rows on screen) follows `next_offset` until the list ends or the page
has all it shows."""

from __future__ import annotations

from zimmer_common.bus import Bus
from zimmer_common.contracts import spot as c

LIMIT_MAX = 500  # SessionQuery's own bound on one answer's count


async def every_session(bus: Bus, query: c.SessionQuery, at_most: int) -> c.SessionList:
    """The sessions `query` matches from its offset, at most `at_most`, page after page;
    `next_offset` says where the rows past `at_most` start (null when none are left)."""
    sessions: list[c.SessionView] = []
    total = 0
    at: int | None = query.offset
    while at is not None and len(sessions) < at_most:
        page = await bus.request(c.LIST_SESSIONS, query.model_copy(update={
            "offset": at, "limit": min(LIMIT_MAX, at_most - len(sessions))}))
        sessions += page.sessions
        total, at = page.total, page.next_offset
    return c.SessionList(sessions=sessions, total=total, next_offset=at)
