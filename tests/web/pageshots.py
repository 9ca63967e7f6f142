"""Saving the operator pages' screenshots for review."""

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
