"""How plumbing reaches a person (seed 003 "Alerts": an ERROR record is a page, so an ERROR that
pages nobody is a page lost): the bus, the consumers and the job runner are handed a `PageFn`, which
the service wires to its pager (`zimmer_common.pager`: it logs the ERROR record and sends the page
durably). `page_or_log` is the one place plumbing raises an ERROR, so every ERROR it logs pages."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from zimmer_common.logs import kv

log = logging.getLogger("zimmer.page")

# (title: stable, no ids; message; fingerprint: the kind of failure; snippet_source: raw text or an
# exception, redacted by the pager; context: the ids and details)
PageFn = Callable[[str, str, list[str], object, dict[str, Any]], Awaitable[None]]


async def page_or_log(page: PageFn | None, title: str, message: str, fingerprint: list[str], *,
                      snippet_source: object = None, **context: Any) -> None:
    """Page through `page`; never raises. Without one (a tool, a test harness), or when paging
    itself failed, the ERROR record is what is left."""
    if page is not None:
        try:
            await page(title, message, fingerprint, snippet_source, context)
            return
        except Exception as exc:  # noqa: BLE001 - paging must never be what fails the caller
            context = {**context, "page_failed": repr(exc)}
    # ERROR without a page: nothing wired to page with here, or the pager itself failed.
    log.error(title, extra=kv(message=message, fingerprint=fingerprint, **context))
