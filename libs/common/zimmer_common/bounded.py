"""Run a subprocess from asyncio code with a hard upper bound on its lifetime.

``asyncio.wait_for(proc.communicate(), t)`` is not enough on its own: on
timeout it raises and leaves the child (and anything it spawned) running, and
``communicate()`` keeps waiting for EOF while any grandchild still holds the
output pipe. :func:`run_bounded` instead guarantees that when it returns (or
is cancelled) the child's whole process group has been killed, and it reports
every outcome, including "could not start", as a :class:`BoundedResult`.

Worst-case time until return is roughly ``timeout + kill_grace + 1s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BoundedResult", "run_bounded"]

# After SIGKILL the group normally vanishes within milliseconds; this only
# bounds pathological cases (uninterruptible sleep, or a process that left
# our group with setsid() but still holds a pipe) so we never hang on them.
_POST_KILL_WAIT = 1.0
_READ_CHUNK = 64 * 1024
# Shell convention: 127 = command not found, 126 = found but cannot execute.
_RC_NOT_FOUND = 127
_RC_CANNOT_EXECUTE = 126


@dataclass(frozen=True, slots=True)
class BoundedResult:
    """Outcome of :func:`run_bounded`.

    ``returncode`` is negative when the child died from a signal (e.g. -9
    after SIGKILL) and None only if it could not be reaped after killing.
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One-line human summary, e.g. "exited 2" or "timed out after 5.0s"."""
        if self.timed_out:
            return f"timed out after {self.duration:.1f}s"
        if self.returncode is None:
            return "did not exit"
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        return f"exited {self.returncode}"


class _Capture:
    """Keeps the first *limit* bytes of a stream and counts the rest.

    The rest is still read (and dropped) so a chatty child never blocks on a
    full pipe, while memory stays bounded.
    """

    __slots__ = ("_chunks", "_limit", "_kept", "dropped")

    def __init__(self, limit: int) -> None:
        self._chunks: list[bytes] = []
        self._limit = limit
        self._kept = 0
        self.dropped = 0

    def feed(self, data: bytes) -> None:
        room = self._limit - self._kept
        if room > 0:
            head = data[:room]
            self._chunks.append(head)
            self._kept += len(head)
            self.dropped += len(data) - len(head)
        else:
            self.dropped += len(data)

    def text(self) -> str:
        # Callers log this and store it in Postgres: it must be valid UTF-8
        # and free of NULs (text columns reject them), whatever the child wrote.
        text = b"".join(self._chunks).decode("utf-8", errors="replace").replace("\x00", "")
        if self.dropped:
            text += f"…[truncated {self.dropped} bytes]"
        return text


async def _drain(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_READ_CHUNK):
        capture.feed(chunk)


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    if stdin is None:
        return
    try:
        if data:
            stdin.write(data)
            await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        # The child exited (or closed stdin) without reading everything; its
        # exit status is the meaningful outcome, not our write error.
        pass
    finally:
        stdin.close()


def _killpg(pgid: int, sig: signal.Signals) -> None:
    # ProcessLookupError: the group is already empty, which is the goal.
    # PermissionError: the id now names someone else's group; never touch it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _wait_all(tasks: set[asyncio.Task[object]], timeout: float) -> set[asyncio.Task[object]]:
    """Wait until all *tasks* finish or *timeout* passes; return the unfinished."""
    pending = {t for t in tasks if not t.done()}
    if pending and timeout > 0:
        _, pending = await asyncio.wait(pending, timeout=timeout)
    return pending


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    # asyncio has no public way to close a subprocess's pipes early. Without
    # this, pipes still held by an escaped grandchild would leak their fds
    # (and a "unclosed transport" warning) for as long as it lives. close()
    # is idempotent and also kills the leader if it somehow still runs.
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _validate(timeout: float, kill_grace: float, max_output_bytes: int) -> None:
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a finite number > 0, got {timeout!r}")
    if not (math.isfinite(kill_grace) and kill_grace >= 0):
        raise ValueError(f"kill_grace must be a finite number >= 0, got {kill_grace!r}")
    if max_output_bytes < 0:
        raise ValueError(f"max_output_bytes must be >= 0, got {max_output_bytes!r}")


async def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,  # noqa: A002 - mirrors subprocess.run()
    kill_grace: float = 2.0,
    max_output_bytes: int = 1_000_000,
) -> BoundedResult:
    """Run *argv* (no shell) and return its result within a bounded time.

    On *timeout* the child's process group gets SIGTERM, then SIGKILL after
    *kill_grace* seconds, and the result has ``timed_out=True``; nothing is
    raised. The deadline also covers reading output, so a grandchild that
    keeps stdout/stderr open cannot stall the call. If the awaiting task is
    cancelled the group is SIGKILLed and CancelledError propagates.

    *env* replaces the environment entirely (as in ``subprocess``). stdin is
    /dev/null unless *input* is given. stdout and stderr are each capped at
    *max_output_bytes*. A program that cannot be started yields returncode
    127 (not found) or 126 (other OS error) with the reason in ``stderr``.
    """
    if isinstance(argv, (str, bytes)):
        # A string is a Sequence[str] too; "ls -l" would run a program "l".
        raise TypeError("argv must be a sequence of arguments, not a string")
    args = tuple(os.fspath(a) for a in argv)
    if not args:
        raise ValueError("argv must not be empty")
    _validate(timeout, kill_grace, max_output_bytes)

    started = time.monotonic()
    deadline = started + timeout
    try:
        proc = await asyncio.create_subprocess_exec(
            *args,
            stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            # Own session => own process group whose id is the child's pid, so
            # killpg() reaches every descendant that did not detach itself.
            start_new_session=True,
        )
    except OSError as exc:
        rc = _RC_NOT_FOUND if isinstance(exc, FileNotFoundError) else _RC_CANNOT_EXECUTE
        return BoundedResult(
            argv=args,
            returncode=rc,
            stdout="",
            stderr=f"failed to start {args[0]!r}: {exc}",
            timed_out=False,
            duration=time.monotonic() - started,
        )

    pgid = proc.pid
    out, err = _Capture(max_output_bytes), _Capture(max_output_bytes)
    waiter = asyncio.ensure_future(proc.wait())
    tasks: set[asyncio.Task[object]] = {
        waiter,
        asyncio.ensure_future(_drain(proc.stdout, out)),
        asyncio.ensure_future(_drain(proc.stderr, err)),
    }
    if input is not None:
        tasks.add(asyncio.ensure_future(_feed(proc.stdin, input)))

    timed_out = False
    try:
        # "Done" means the child exited *and* both pipes reached EOF.
        pending = await _wait_all(tasks, deadline - time.monotonic())
        if pending:
            timed_out = True
            _killpg(pgid, signal.SIGTERM)
            pending = await _wait_all(pending, kill_grace)
        # SIGKILL even on a clean exit: it removes leftovers in the group
        # (daemons that closed our pipes, or grandchildren ignoring SIGTERM)
        # so nothing outlives the call. Harmless when the group is empty.
        _killpg(pgid, signal.SIGKILL)
        await _wait_all(pending, _POST_KILL_WAIT)
    except BaseException:
        # Cancellation (or anything unexpected): no grace, the caller wants
        # to stop now, and the group must not outlive us either way.
        _killpg(pgid, signal.SIGKILL)
        # Give the child watcher a moment to reap, so the pid is really gone
        # when the caller sees CancelledError. Reaping happens regardless.
        with contextlib.suppress(asyncio.CancelledError):
            await _wait_all({waiter}, _POST_KILL_WAIT)
        raise
    finally:
        for task in tasks:
            task.cancel()  # no-op for finished tasks; stops stuck readers
        _close_transport(proc)
        # Let the cancellations land so no task outlives this call.
        await asyncio.wait(tasks)

    for task in tasks:
        # Surface unexpected errors (bugs), now that the group is dead.
        if task.done() and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # the task failed, so exception() is set

    return BoundedResult(
        argv=args,
        returncode=proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration=time.monotonic() - started,
    )
