"""The accessibility pass at 375 px (test_accessibility.py walks 1280 px): the same pages, checks
and refusals on a stack of its own, in a file of its own so that a second worker takes it."""

from __future__ import annotations

import sys
from pathlib import Path

from test_accessibility import accessibility_pass

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backlog"))
from liveness_world import stack_setup as stack_setup  # the fixture: the stack reads a fake GitHub


async def test_every_page_passes_the_accessibility_pass_at_375_px(stack, stack_setup, browser) -> None:  # type: ignore[no-untyped-def]  # pytest fixtures are untyped
    await accessibility_pass(stack, stack_setup, browser, "375px")
