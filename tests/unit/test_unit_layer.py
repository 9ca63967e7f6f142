"""The fast layer (`-m unit`, `python3 dev.py test --fast`) is what tests/conftest.py says it is:
a test needing none of the servers is marked `unit` and runs with sockets disabled, so a unit test
(or one of its fixtures) that opens a TCP socket fails, while asyncio's event loop (a Unix
socketpair) still works; a server fixture anywhere in a test's closure, or `@pytest.mark.network`,
keeps a test out of the layer (and its sockets on: the `network` tests of the full suite run after
unit tests). Checked by running tests/conftest.py itself, with the project's pytest settings, on a
small inner suite in a child pytest."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

INNER = '''
import asyncio
import socket

import pytest


@pytest.fixture
def database_url():  # stands in for the server fixture: the rule goes by the closure's names
    return "postgresql://nowhere/"


@pytest.fixture
def needs_database(database_url):  # a server fixture one step away
    return database_url


@pytest.fixture
def listening():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s


def test_connects_over_tcp():
    socket.create_connection(("127.0.0.1", 9), timeout=1)


def test_makes_a_tcp_socket():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


def test_uses_a_fixture_that_binds(listening):
    pass


async def test_runs_on_an_event_loop():
    reader, writer = socket.socketpair()
    reader.close(), writer.close()
    await asyncio.sleep(0)


def test_pure():
    assert 1 + 1 == 2


def test_with_a_server_fixture(database_url):
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


def test_with_a_server_fixture_underneath(needs_database):
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


@pytest.mark.network
def test_marked_network():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


@pytest.mark.e2e
def test_marked_e2e():
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


def test_zz_the_layer(request):
    units = {item.name for item in request.session.items if item.get_closest_marker("unit")}
    assert units == {"test_connects_over_tcp", "test_makes_a_tcp_socket", "test_uses_a_fixture_that_binds",
                     "test_runs_on_an_event_loop", "test_pure", "test_zz_the_layer"}
'''


def _ini() -> str:
    """The project's [tool.pytest.ini_options] (markers, --strict-markers, asyncio mode) as a pytest.ini."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    lines = ["[pytest]"]
    for key in ("asyncio_mode", "asyncio_default_fixture_loop_scope", "asyncio_default_test_loop_scope", "addopts"):
        lines.append(f"{key} = {options[key]}")
    lines.append("markers =")
    lines += [f"    {marker}" for marker in options["markers"]]
    return "\n".join(lines) + "\n"


def _outcomes(tmp_path: Path, *args: str) -> dict[str, str]:
    (tmp_path / "pytest.ini").write_text(_ini())
    (tmp_path / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(INNER)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q",
                          f"--basetemp={tmp_path / 'inner-tmp'}", *args, "test_inner.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    found = re.findall(r"^(PASSED|FAILED|ERROR) test_inner\.py::(\w+)", run.stdout, re.MULTILINE)
    return {name: outcome for outcome, name in found} | {"": run.stdout[-3000:] + run.stderr[-2000:]}


def test_minus_m_unit_selects_the_layer_and_a_unit_test_that_opens_a_socket_fails(tmp_path: Path) -> None:
    outcomes = _outcomes(tmp_path, "-m", "unit")
    log = outcomes.pop("")
    assert outcomes == {
        "test_connects_over_tcp": "FAILED",  # getaddrinfo and socket() are refused
        "test_makes_a_tcp_socket": "FAILED",
        "test_uses_a_fixture_that_binds": "ERROR",  # fixtures are set up with sockets disabled too
        "test_runs_on_an_event_loop": "PASSED",  # a Unix socketpair: asyncio needs it
        "test_pure": "PASSED",
        "test_zz_the_layer": "PASSED",  # the six above, and only they, were marked and selected
    }, log
    assert "4 deselected" in log, log  # a server fixture (directly or one step away), network, e2e
    assert log.count("SocketBlockedError") >= 3, log
