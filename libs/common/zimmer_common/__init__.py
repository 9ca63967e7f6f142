"""Plumbing shared by every Zimmer service: config, bus, outbox, jobs, processes, clock, metrics.

No domain rules live here; contracts (the published language between services) do, because
every service must agree on them byte for byte.
"""

__version__ = "0.1.0"
