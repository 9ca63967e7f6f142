"""zimmer_runtime: the client an agent runtime embeds to talk to the Zimmer control plane.

It speaks the control plane's wire format (the contracts in `zimmer_common.contracts`, and
nothing else of Zimmer's): ask for turns, obey commands, report what happened. docs/runtime.md
describes the protocol subject by subject.

    async with await RuntimeClient.connect("nats://127.0.0.1:4222") as client:
        client.serve_commands(obey)
        decision = await client.request_turn(session_id, "first_start", prompt="Fix the flaky test")
        await client.report_status(session_id, "needs_input")
"""

from zimmer_common.contracts.runtime import SampleQuota, StartTurn, StopTurn, WindowReadingIn
from zimmer_runtime.client import RuntimeClient, TurnDecision
from zimmer_runtime.commands import Command, CommandHandler
from zimmer_runtime.config import FleetCredential, RuntimeConfig
from zimmer_runtime.envelopes import LogLine
from zimmer_runtime.errors import ReportTooLarge, RuntimeRequestError
from zimmer_runtime.metrics import RuntimeMetrics

__all__ = [
    "Command",
    "CommandHandler",
    "FleetCredential",
    "LogLine",
    "ReportTooLarge",
    "RuntimeClient",
    "RuntimeConfig",
    "RuntimeMetrics",
    "RuntimeRequestError",
    "SampleQuota",
    "StartTurn",
    "StopTurn",
    "TurnDecision",
    "WindowReadingIn",
]
