"""Headless Chromium for the operator pages: Playwright driving Debian's `chromium` package
(never a downloaded browser). A machine without it fails these tests, naming what to install;
they never skip."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest


def chromium_path() -> str:
    found = os.environ.get("ZIMMER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium on PATH: install Debian's package (`apt-get install chromium`; .ci/run does) "
                    "or set ZIMMER_CHROMIUM to a Chromium binary", pytrace=False)
    return found


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                            args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            await launched.close()
