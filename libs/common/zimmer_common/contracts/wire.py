"""Headers every peer on the bus writes and reads (DESIGN §3): part of the wire format, so they
live with the contracts, where a client outside the services (`zimmer_runtime`) can read them.

- `Zimmer-Deadline`: on every request/reply, the requester's absolute deadline (seconds since the
  epoch, `%.6f`); a server drops a request that arrives past it and commits nothing after it.
- `Zimmer-Caller`: who asks, carried through inner requests (logs and refusals name it).
- `Nats-Msg-Id`: on every JetStream publish, the message's idempotency key; the stream drops a
  second message with the same id inside its duplicate window.
"""

from __future__ import annotations

from typing import Final

DEADLINE_HEADER: Final = "Zimmer-Deadline"
CALLER_HEADER: Final = "Zimmer-Caller"
MSG_ID_HEADER: Final = "Nats-Msg-Id"
# A requester waits this long past its deadline for a reply sent just before it.
REPLY_GRACE: Final = 0.25


def deadline_header(due: float) -> str:
    """How a deadline is written in `Zimmer-Deadline`."""
    return f"{due:.6f}"
