"""What the operator pages' tests share: screenshots for review, the accessibility checks, and the
notice an action left (or the refusal it met instead)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SCREENSHOTS = Path(os.environ.get("ZIMMER_TEST_OUTPUT", Path(__file__).resolve().parents[2] / "test-output")) \
    / "screenshots"
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "375px": {"width": 375, "height": 800}}


async def screenshot(page: Any, name: str) -> list[Path]:
    """The page at desktop width and at 375 px, saved for review; returns the paths."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    paths = []
    for label, size in VIEWPORTS.items():
        await page.set_viewport_size(size)
        path = SCREENSHOTS / f"{name}-{label}.png"
        await page.screenshot(path=str(path), full_page=True)
        paths.append(path)
    return paths


ACCESSIBILITY_PROBLEMS = """() => {
  const problems = [];
  for (const el of document.querySelectorAll('input:not([type=hidden]), select, textarea')) {
    const labelled = (el.id && document.querySelector(`label[for="${el.id}"]`)) || el.closest('label')
      || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!labelled) problems.push(`unlabelled ${el.tagName.toLowerCase()} name=${el.name}`);
  }
  for (const b of document.querySelectorAll('button, a')) {
    if (!(b.getAttribute('aria-label') || b.textContent.trim())) problems.push(`nameless ${b.tagName.toLowerCase()}`);
  }
  let last = 0;
  for (const h of document.querySelectorAll('h1, h2, h3, h4, h5, h6')) {
    const level = parseInt(h.tagName[1]);
    if (level > last + 1) problems.push(`heading ${h.tagName} "${h.textContent.trim()}" skips a level after h${last}`);
    last = level;
  }
  if (document.querySelectorAll('h1').length !== 1) problems.push('not exactly one h1');
  if (!document.documentElement.lang) problems.push('no lang on <html>');
  return problems;
}"""


async def accessibility_problems(page: Any) -> list[str]:
    """Labels on every control, a name on every button and link, headings in order, one h1."""
    return list(await page.evaluate(ACCESSIBILITY_PROBLEMS))


async def notice(page: Any) -> str:
    """The notice an action left on the page it went back to. A refusal page fails at once with
    its own words, rather than after a 30 s wait for a notice that never comes."""
    either = page.locator(".notice[role=status], [role=alert]").first
    await either.wait_for()
    said = await either.inner_text()
    if await either.get_attribute("role") == "alert":
        main = await page.locator("main").inner_text()
        raise AssertionError(f"the action was refused: {said!r} (the page: {main[:800]!r})")
    return said
