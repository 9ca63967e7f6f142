"""One TLS context per process for the outgoing HTTP clients.

httpx builds a context for every client it makes, loading the CA bundle each time (10-20 ms of
CPU); a client made per operation (a liveness probe, a listing) or per poll (`httpx.get` in a
readiness loop) paid that every time: a twentieth of the test suite's CPU, profiled. A context is
safe to share between clients and threads.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def client_tls() -> ssl.SSLContext:
    """The process's TLS context for outgoing HTTP (httpx's default: certifi's CA bundle)."""
    return httpx.create_ssl_context()
