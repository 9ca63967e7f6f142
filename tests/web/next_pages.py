"""Following a page's "next page" links in the browser (lists that page by bytes, issue 27 #13)."""

from __future__ import annotations

from typing import Any


async def rows_following(page: Any, rows: str, attribute: str, link: str) -> tuple[list[str], int]:
    """The `data-<attribute>` of every row matching `rows`, page after page through the
    `[data-next-page=<link>]` link; and how many pages it took."""
    values: list[str] = []
    pages = 0
    while True:
        pages += 1
        values += await page.locator(rows).evaluate_all(f"rows => rows.map(r => r.dataset.{attribute})")
        more = page.locator(f'[data-next-page="{link}"]')
        if await more.count() == 0:
            return values, pages
        async with page.expect_navigation():
            await more.click()
        assert pages < 20, "the next page links never ended"
