"""Headless Chromium for the operator pages: Playwright driving Debian's `chromium` package
(never a downloaded browser). A machine without it fails these tests, naming what to install;
they never skip.

One Chromium per test process, which each test reaches over the DevTools protocol: launching it
for every test cost ~2 s of the suite's cores a test (issue 31), and each test still gets its own
browser contexts, closed when it ends, so no cookie, storage or page crosses from one to the next."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# What Playwright's own launch passes (its chromiumSwitches, headless): no throttled timers in a
# page that is not in front, no first-run or background work, a mouse-like device for :hover.
SWITCHES = (
    "--headless", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4",
    "--disable-field-trial-config", "--disable-background-networking", "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows", "--disable-renderer-backgrounding", "--disable-back-forward-cache",
    "--disable-breakpad", "--disable-component-extensions-with-background-pages", "--disable-component-update",
    "--no-default-browser-check", "--disable-default-apps", "--disable-extensions", "--disable-hang-monitor",
    "--disable-ipc-flooding-protection", "--disable-popup-blocking", "--disable-prompt-on-repost",
    "--force-color-profile=srgb", "--metrics-recording-only", "--no-first-run", "--password-store=basic",
    "--use-mock-keychain", "--no-service-autorun", "--disable-search-engine-choice-screen",
    "--remote-debugging-port=0", "about:blank",
)
STARTUP_SECONDS = 30


def chromium_path() -> str:
    found = os.environ.get("ZIMMER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no chromium on PATH: install Debian's package (`apt-get install chromium`; .ci/run does) "
                    "or set ZIMMER_CHROMIUM to a Chromium binary", pytrace=False)
    return found


class SharedChromium:
    """The process's one Chromium, started on first use and again if it has died."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._endpoint = ""
        self._profile: str | None = None

    def endpoint(self) -> str:
        if self._process is None or self._process.poll() is not None:
            self._start()
        return self._endpoint

    def _start(self) -> None:
        self.stop()
        self._profile = tempfile.mkdtemp(prefix="zimmer-chromium-")
        self._process = subprocess.Popen([chromium_path(), f"--user-data-dir={self._profile}", *SWITCHES],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
        # Chromium writes the port it chose, then the browser's DevTools path, once it listens.
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            lines = port_file.read_text().split() if port_file.exists() else []
            if len(lines) >= 2:
                self._endpoint = f"ws://127.0.0.1:{lines[0]}{lines[1]}"
                return
            if self._process.poll() is not None:
                pytest.fail(f"chromium exited with {self._process.returncode} before it listened", pytrace=False)
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"chromium did not listen within {STARTUP_SECONDS} s", pytrace=False)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)  # its own group: the renderers and GPU process too
            self._process.wait()
        self._process = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None


@pytest.fixture(scope="session")
def shared_chromium() -> Iterator[SharedChromium]:
    chromium = SharedChromium()
    try:
        yield chromium
    finally:
        chromium.stop()


@pytest.fixture
async def browser(shared_chromium: SharedChromium) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        connected = await pw.chromium.connect_over_cdp(shared_chromium.endpoint())
        try:
            yield connected
        finally:
            await connected.close()  # closes the contexts this test made, then disconnects
