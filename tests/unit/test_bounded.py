"""Tests for zimmer_common.bounded, using real processes (no mocks).

Timeouts here are deliberately generous so a loaded CI machine cannot make a
child miss its setup before the deadline; duration assertions are only upper
bounds proving we did not wait for the children's 60 s sleeps.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from zimmer_common.bounded import BoundedResult, run_bounded

PY = sys.executable

# Installs SIG_IGN for SIGTERM *before* printing the pid, so a printed pid
# proves the process will only die from SIGKILL.
IGNORE_TERM_AND_SLEEP = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(os.getpid(), flush=True)
    time.sleep(60)
    """
)


def _spawning_child(child_exits: bool) -> str:
    """Child that starts a TERM-ignoring grandchild sharing its stdout."""
    tail = "sys.exit(0)" if child_exits else "time.sleep(60)"
    return textwrap.dedent(
        f"""
        import os, signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(os.getpid(), flush=True)
        subprocess.Popen([sys.executable, "-c", {IGNORE_TERM_AND_SLEEP!r}])
        time.sleep(0.5)  # let the grandchild print its pid before we move on
        {tail}
        """
    )


def _is_gone(pid: int, wait: float = 5.0) -> bool:
    """True once *pid* no longer runs (zombies awaiting a reaper count as gone).

    Polls briefly because SIGKILL delivery and reparenting are asynchronous.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _pids(result: BoundedResult) -> list[int]:
    return [int(line) for line in result.stdout.split()]


async def test_exit_code_and_output_capture() -> None:
    code = "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(3)"
    result = await run_bounded([PY, "-c", code], timeout=30)
    assert result.returncode == 3
    assert result.stdout == "hello\n"
    assert result.stderr == "oops\n"
    assert not result.timed_out
    assert not result.ok
    assert result.describe() == "exited 3"
    assert result.argv == (PY, "-c", code)
    assert result.duration >= 0


async def test_success_with_input_cwd_and_env(tmp_path: Path) -> None:
    code = "import os, sys; sys.stdout.write(sys.stdin.read() + os.getcwd() + os.environ['ZB'])"
    env = {**os.environ, "ZB": "-marker"}
    result = await run_bounded([PY, "-c", code], timeout=30, input=b"in:", cwd=tmp_path, env=env)
    assert result.ok, result
    assert result.describe() == "exited 0"
    assert result.stdout == f"in:{os.path.realpath(tmp_path)}-marker"


async def test_stdin_is_devnull_without_input() -> None:
    # Would hang (and time out) if the child inherited a terminal as stdin.
    result = await run_bounded([PY, "-c", "import sys; print(repr(sys.stdin.read()))"], timeout=30)
    assert result.ok, result
    assert result.stdout.strip() == "''"


async def test_invalid_utf8_and_nul_bytes_become_valid_text() -> None:
    code = "import sys; sys.stdout.buffer.write(b'ok\\xff\\xfe\\x00end'); sys.stderr.buffer.write(b'\\xc3')"
    result = await run_bounded([PY, "-c", code], timeout=30)
    assert result.ok, result
    assert result.stdout.startswith("ok") and result.stdout.endswith("end")
    assert "\ufffd" in result.stdout
    assert "\x00" not in result.stdout
    assert result.stderr == "\ufffd"
    result.stdout.encode("utf-8")  # strict encode must not raise


async def test_output_is_truncated_with_marker() -> None:
    code = "import sys; sys.stdout.write('a' * 10000); sys.stderr.write('b' * 50)"
    result = await run_bounded([PY, "-c", code], timeout=30, max_output_bytes=100)
    assert result.ok, result
    assert result.stdout == "a" * 100 + "…[truncated 9900 bytes]"
    assert result.stderr == "b" * 50


async def test_huge_output_is_drained_not_blocking() -> None:
    # 5 MB far exceeds the pipe buffer: if excess output were not read and
    # discarded, the child would block on write and this would time out.
    code = "import sys; sys.stdout.write('x' * 5_000_000)"
    result = await run_bounded([PY, "-c", code], timeout=30, max_output_bytes=1000)
    assert result.ok, result
    assert result.stdout.startswith("x" * 1000)
    assert result.stdout.endswith("…[truncated 4999000 bytes]")


async def test_missing_executable_returns_127() -> None:
    result = await run_bounded(["/nonexistent/zimmer-no-such-binary", "--flag"], timeout=5)
    assert result.returncode == 127
    assert "zimmer-no-such-binary" in result.stderr
    assert not result.timed_out
    assert not result.ok
    assert result.describe() == "exited 127"


async def test_non_executable_file_returns_126(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = await run_bounded([str(script)], timeout=5)
    assert result.returncode == 126
    assert result.stderr


async def test_child_ignoring_sigterm_is_killed_after_grace() -> None:
    start = time.monotonic()
    result = await run_bounded([PY, "-c", IGNORE_TERM_AND_SLEEP], timeout=3, kill_grace=0.5)
    assert time.monotonic() - start < 20
    assert result.timed_out
    assert not result.ok
    assert result.returncode == -signal.SIGKILL
    assert result.describe().startswith("timed out after ")
    [pid] = _pids(result)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_child_honouring_sigterm_stops_within_grace() -> None:
    result = await run_bounded([PY, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                               timeout=3, kill_grace=10)
    assert result.timed_out
    assert result.stdout == "up\n"  # partial output survives a timeout
    assert result.returncode == -signal.SIGTERM
    assert result.duration < 10  # did not sit out the grace period


@pytest.mark.parametrize("child_exits", [False, True], ids=["child-sleeps", "child-exits-pipe-held"])
async def test_grandchildren_are_killed(child_exits: bool) -> None:
    # child-exits-pipe-held: the child exits at once but the grandchild keeps
    # stdout open, which would hang a naive read-until-EOF forever.
    start = time.monotonic()
    result = await run_bounded([PY, "-c", _spawning_child(child_exits)], timeout=4, kill_grace=0.5)
    assert time.monotonic() - start < 20
    assert result.timed_out
    assert not result.ok
    pids = _pids(result)
    assert len(pids) == 2, result
    for pid in pids:
        assert _is_gone(pid), f"pid {pid} survived"
    if child_exits:
        assert result.returncode == 0
    else:
        assert result.returncode == -signal.SIGKILL


async def test_cancellation_kills_child(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = IGNORE_TERM_AND_SLEEP.replace(
        "print(os.getpid(), flush=True)", f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))"
    )
    task = asyncio.create_task(run_bounded([PY, "-c", code], timeout=60))
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "child never started"
        assert not task.done(), task
        await asyncio.sleep(0.05)
    pid = int(pid_file.read_text())

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _is_gone(pid)


async def test_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError):
        await run_bounded("echo hi", timeout=5)  # type: ignore[arg-type]  # the wrong type, on purpose
    with pytest.raises(ValueError):
        await run_bounded([], timeout=5)
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            await run_bounded([PY, "-c", "pass"], timeout=bad)
    with pytest.raises(ValueError):
        await run_bounded([PY, "-c", "pass"], timeout=5, kill_grace=-1)
    with pytest.raises(ValueError):
        await run_bounded([PY, "-c", "pass"], timeout=5, max_output_bytes=-1)


def test_describe_variants() -> None:
    base = dict(argv=("x",), stdout="", stderr="", duration=5.04)
    assert BoundedResult(returncode=-9, timed_out=True, **base).describe() == "timed out after 5.0s"
    assert BoundedResult(returncode=2, timed_out=False, **base).describe() == "exited 2"
    assert BoundedResult(returncode=-15, timed_out=False, **base).describe() == "killed by SIGTERM"
    assert BoundedResult(returncode=None, timed_out=False, **base).describe() == "did not exit"
    assert BoundedResult(returncode=0, timed_out=False, **base).ok
    assert not BoundedResult(returncode=0, timed_out=True, **base).ok
