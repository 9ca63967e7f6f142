"""A metrics port already in use is not fatal: two replicas on one host, both with the default
ZIMMER_METRICS_PORT, both serve their metrics (the second on a free port, with one WARNING)."""

from __future__ import annotations

import logging
import socket

import httpx
import pytest

from zimmer_common.metrics import ServiceMetrics
from zimmer_common.settings import Settings

pytestmark = pytest.mark.network  # binds ports on 127.0.0.1


def test_a_second_replica_on_the_default_port_serves_on_a_free_one(caplog: pytest.LogCaptureFixture) -> None:
    default = Settings.model_fields["metrics_port"].default
    holder = socket.socket()  # whoever holds the default port here: another replica, or anything
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", default))
    except OSError:
        pass  # already held by something on this machine: the case under test all the same
    else:
        holder.listen()
    first, second = ServiceMetrics("backlog", "0", "backlog-1"), ServiceMetrics("backlog", "0", "backlog-2")
    try:
        first_port = first.serve_http("127.0.0.1", 0)
        assert first_port
        with caplog.at_level(logging.WARNING, logger="zimmer.metrics"):
            second_port = second.serve_http("127.0.0.1", first_port)  # the first one's port: in use
            fallback_port = ServiceMetrics("alerts", "0", "alerts-1")
            default_port = fallback_port.serve_http("127.0.0.1", default)
        try:
            assert second_port and second_port != first_port
            assert default_port and default_port != default
            for port, instance in ((first_port, "backlog-1"), (second_port, "backlog-2")):
                body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
                assert f'zimmer_service_info{{instance="{instance}"' in body  # each its own registry
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 2, [r.getMessage() for r in warnings]
            fields = [r.fields for r in warnings]  # type: ignore[attr-defined]  # log records carry the `fields` extra
            assert fields == [{"port_wanted": first_port, "port": second_port},
                              {"port_wanted": default, "port": default_port}]
        finally:
            fallback_port.stop_http()
    finally:
        first.stop_http()
        second.stop_http()
        holder.close()


def test_a_port_that_cannot_be_bound_for_another_reason_still_fails() -> None:
    with pytest.raises(OSError):
        ServiceMetrics("backlog", "0", "backlog-1").serve_http("192.0.2.1", 0)  # an address not on this host
