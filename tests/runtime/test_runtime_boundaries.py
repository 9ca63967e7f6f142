"""zimmer_runtime speaks the contracts and nothing else of Zimmer's (DESIGN §9): a runtime, and the
simulator, can be written against it and docs/runtime.md alone. And its pure parts: the buffer,
the log batches, the credential, the command decoding."""

from __future__ import annotations

import ast
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import zimmer_runtime
from zimmer_common.contracts.logs import LogLinesIn
from zimmer_common.contracts.runtime import START_TURN, StartTurn
from zimmer_runtime.buffer import OutgoingReport, ReportBuffer
from zimmer_runtime.config import FleetCredential, RuntimeConfig
from zimmer_runtime.envelopes import LogLine, Undecodable, decode_command, log_batches, report_envelope

PACKAGE = Path(zimmer_runtime.__file__).parent
ALLOWED = "zimmer_common.contracts"


def zimmer_imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return [n for n in names if n.startswith("zimmer")]


def test_its_modules_import_only_the_contracts() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) >= 8
    for path in modules:
        for name in zimmer_imports(path):
            assert name == ALLOWED or name.startswith(ALLOWED + ".") or name.startswith("zimmer_runtime"), \
                f"{path.name} imports {name}"


def test_importing_it_loads_nothing_else_of_zimmers() -> None:
    """Transitively too: a contract that imported plumbing (settings, the bus) would drag it in."""
    code = ("import sys, zimmer_runtime; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('zimmer')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    outside = [m for m in loaded.stdout.split() if not (m == "zimmer_common" or m.startswith(ALLOWED)
                                                         or m.startswith("zimmer_runtime"))]
    assert outside == []


def report(kind: str) -> OutgoingReport:
    return OutgoingReport(kind=kind, subject=f"zimmer.ingest.{kind}", key=kind, body=b"{}")


def test_a_full_buffer_drops_the_oldest_and_keeps_order() -> None:
    buffer = ReportBuffer(2)
    a, b, c = report("a"), report("b"), report("c")
    assert buffer.append(a) is None and buffer.append(b) is None
    assert buffer.append(c) is a
    assert buffer.head() is b
    assert not buffer.remove_sent(a)  # dropped while it was being published: the head stays
    assert buffer.remove_sent(b) and buffer.head() is c and len(buffer) == 1


def test_log_lines_are_batched_within_lines_and_bytes_with_stable_ids() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    lines = [LogLine(7, "info", "x" * 100) for _ in range(25)]
    batches = log_batches(lines, key="k", max_bytes=1_000, now=now, max_lines=10)
    sizes = [len(b.lines) for _, b in batches]
    assert sum(sizes) == 25 and len(sizes) >= 3 and all(n < 10 for n in sizes)  # bytes bind before the count
    assert all(len(b.model_dump_json()) <= 1_100 for _, b in batches)
    ids = [line.message_id for _, b in batches for line in b.lines]
    assert len(set(ids)) == 25 and ids[0] == "k.0.0" and batches[1][1].lines[0].message_id == "k.1.0"
    assert [k for k, _ in batches] == [f"k.{i}" for i in range(len(batches))]
    assert log_batches(lines, key="k", max_bytes=1_000, now=now, max_lines=10) == batches
    by_count = log_batches(lines, key="k", max_bytes=10**6, now=now, max_lines=10)
    assert [len(b.lines) for _, b in by_count] == [10, 10, 5]
    LogLinesIn.model_validate_json(batches[0][1].model_dump_json())


def test_a_runaway_line_is_cut_to_fit() -> None:
    [(_, batch)] = log_batches([LogLine(1, "verbose", "y" * 200_000)], key="k", max_bytes=10**6,
                               now=datetime.now(UTC))
    assert len(batch.lines[0].message) < 70_000 and batch.lines[0].message.endswith("more characters]")


def test_credentials_map_to_nats_options_and_stay_out_of_reprs() -> None:
    assert FleetCredential().connect_options() == {}
    assert FleetCredential(token="s3cret").connect_options() == {"token": "s3cret"}
    assert "s3cret" not in repr(FleetCredential(token="s3cret"))
    assert FleetCredential(user="fleet", password="pw").connect_options() == {"user": "fleet", "password": "pw"}
    assert FleetCredential(creds_file="/etc/fleet.creds").connect_options() == {"user_credentials": "/etc/fleet.creds"}
    with pytest.raises(ValueError, match="one NATS credential"):
        FleetCredential(token="a", creds_file="/x")
    with pytest.raises(ValueError, match="password"):
        FleetCredential(user="fleet")
    cfg = RuntimeConfig.from_env({"ZIMMER_RUNTIME_NATS_URL": "nats://a:4222, nats://b:4222",
                                  "ZIMMER_RUNTIME_NATS_TOKEN": "t", "ZIMMER_RUNTIME_BUFFER_SIZE": "50"})
    assert (cfg.servers, cfg.credential.kind, cfg.buffer_size) == (["nats://a:4222", "nats://b:4222"], "token", 50)


def test_commands_decode_by_subject_and_refuse_what_they_cannot_read() -> None:
    start = StartTurn(session_id=3, turn_kind="wake", prompt="p", runtime="claude_code", harness="claude_code",
                      model="claude-opus-4")
    body = report_envelope("start_turn", start, key="spot_gate.12", source="spot-gate")
    decoded = decode_command(START_TURN, body)
    assert not isinstance(decoded, Undecodable)
    assert (decoded.id, decoded.kind, decoded.payload) == ("spot_gate.12", "start_turn", start)
    assert isinstance(decode_command("zimmer.runtime.cmd.reboot", body), Undecodable)
    assert isinstance(decode_command(START_TURN, b"not json"), Undecodable)
    newer = body.replace(b'"version":1', b'"version":2')
    assert "newer" in decode_command(START_TURN, newer).reason  # type: ignore[union-attr]  # a refusal here: the result is not None


@pytest.mark.timeout(60)
@pytest.mark.network  # connects to TCP servers on 127.0.0.1
async def test_a_first_connect_to_an_address_nobody_serves_gives_up_after_its_attempts() -> None:
    # nats-py applies max_reconnect_attempts to the first connect too: -1 there never returned.
    import socket

    from zimmer_runtime import RuntimeClient, RuntimeRequestError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(RuntimeRequestError) as refused:
        await RuntimeClient.connect(RuntimeConfig([f"nats://127.0.0.1:{port}"], connect_attempts=2))
    assert refused.value.code == "unavailable" and refused.value.details == {"sent": False}


@pytest.mark.timeout(60)
@pytest.mark.network  # connects to TCP servers on 127.0.0.1
async def test_a_first_connect_is_tried_connect_attempts_times() -> None:
    import asyncio

    from zimmer_runtime import RuntimeClient, RuntimeRequestError

    tried: dict[int, int] = {}
    for attempts in (1, 3):
        taken: list[int] = []

        async def close(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter, taken: list[int] = taken) -> None:
            taken.append(1)  # a server that closes every connection at once, before NATS's INFO
            writer.close()

        server = await asyncio.start_server(close, "127.0.0.1", 0)
        try:
            url = f"nats://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            with pytest.raises(RuntimeRequestError) as refused:
                await RuntimeClient.connect(RuntimeConfig([url], connect_attempts=attempts))
        finally:
            server.close()
            await server.wait_closed()
        tried[attempts] = len(taken)
        assert refused.value.code == "unavailable" and f"cannot connect to NATS at ['{url}']" in str(refused.value)
    assert tried[1] >= 1 and tried[3] == 3 * tried[1]  # each attempt connects as the first did
