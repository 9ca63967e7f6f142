"""A stop signal during a service's start ends the start (issue 31's suite found it): `zimmer up`
stopping a cluster SIGTERMed a replica it had just restarted, still connecting, and the replica
went on starting until the supervisor's stop timeout SIGKILLed it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONNECT_RETRIES_SECONDS = 20  # what a start spends trying a NATS nobody serves (zimmer_common.bus.connect_nats)
GRACE_SECONDS = 5  # the stop's own bound (ZIMMER_SHUTDOWN_GRACE_SECONDS below)


def _unserved_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.network
def test_sigterm_while_the_service_is_still_connecting_stops_it_within_its_grace(database_url: str,
                                                                                  tmp_path: Path) -> None:
    log_path = tmp_path / "sweeper.log"
    env = {**os.environ, "ZIMMER_ENV": "test", "ZIMMER_DATABASE_URL": database_url, "ZIMMER_METRICS_PORT": "-1",
           "ZIMMER_NATS_URL": f"nats://127.0.0.1:{_unserved_port()}", "ZIMMER_LOG_LEVEL": "INFO",
           "ZIMMER_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS)}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "zimmer_cli", "serve", "sweeper"], env=env,
                                stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(600):  # until it has begun starting (imports take a while on a loaded machine)
            if '"starting"' in log_path.read_text(errors="replace") or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert proc.poll() is None, log_path.read_text(errors="replace")
        time.sleep(1.0)  # inside the connect's retries, which alone last about CONNECT_RETRIES_SECONDS
        proc.send_signal(signal.SIGTERM)
        # Bounded well under the retries: before the fix it exited only when they ran out.
        code = proc.wait(timeout=CONNECT_RETRIES_SECONDS / 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log_path.read_text(errors="replace")
    assert code == 0, text
    assert "stop signal during the start" in text and '"stopped"' in text
