"""Sessions' clones as spot-gate lists them (`session_clones`, paged by id): the live ones for the
transcript classification and the integrity check, every one of this host's for the archive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, Literal

from zimmer_common.bus import Bus
from zimmer_common.contracts.clones import SESSION_CLONES, SessionClone, SessionClonesQuery

PAGE_SIZE: Final = 1_000
# A bound on the walk, so an answer that never says "last page" cannot hold a job forever:
# ten million sessions, far past any fleet.
MAX_PAGES: Final = 10_000


class ListingBroken(RuntimeError):
    """spot-gate's pages did not move forward: the listing cannot be trusted to be complete."""


async def pages(bus: Bus, *, scope: Literal["live", "all"], host: str | None = None,
                timeout: float | None = None) -> AsyncIterator[list[SessionClone]]:
    """Every page, in id order. Any error asking is the caller's (a listing that decides deletions
    fails closed on it)."""
    after = 0
    for _ in range(MAX_PAGES):
        page = await bus.request(SESSION_CLONES, SessionClonesQuery(scope=scope, host=host, after_id=after,
                                                                   limit=PAGE_SIZE), timeout=timeout)
        yield page.clones
        if page.next_after_id is None:
            return
        if page.next_after_id <= after:
            raise ListingBroken(f"session_clones answered next_after_id {page.next_after_id} after {after}")
        after = page.next_after_id
    raise ListingBroken(f"session_clones did not finish within {MAX_PAGES} pages")


async def all_clones(bus: Bus, *, scope: Literal["live", "all"], host: str | None = None,
                     timeout: float | None = None) -> list[SessionClone]:
    out: list[SessionClone] = []
    async for page in pages(bus, scope=scope, host=host, timeout=timeout):
        out.extend(page)
    return out
