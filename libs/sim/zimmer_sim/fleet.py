"""The simulated fleet's sessions: they arrive, take turns that spend tokens and print log lines,
and obey every command the control plane sends, through `zimmer_runtime` alone.

One `random.Random` per session, seeded from the run's seed and the session's arrival number, so a
seed decides what each session does whatever order the bus delivers things in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from datetime import datetime, timedelta

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from zimmer_common.contracts import spot
from zimmer_common.contracts.runtime import SampleQuota, StartTurn, StopTurn, WindowReadingIn
from zimmer_common.contracts.spot_policy import CREATE_TRIGGER, FIRE_TRIGGER, CreateTrigger, FireTrigger
from zimmer_runtime import Command, LogLine, RuntimeClient, RuntimeRequestError
from zimmer_sim.accounts import AccountPool, request_dollars, utc_now
from zimmer_sim.disk import SimDisk
from zimmer_sim.ledger import Ledger, Restart, SessionRecord
from zimmer_sim.profile import CLAUDE_MODELS, CODEX_MODELS, GENESIS_MIX, Profile

log = logging.getLogger("zimmer_sim.fleet")
TRIGGER_GENESES = ("slack", "github_issue", "schedule")
LEVELS = (("verbose", 0.3), ("info", 0.55), ("warning", 0.1), ("error", 0.05))
LOG_MARK = "[sim] "  # the fleet's own lines: the control plane writes notes of its own into a timeline
GATED_KINDS = ("first_start", "follow_up", "wake", "restart")
RETRIES = 5  # a request the control plane did not answer is tried this many times in all, with its key
RETRY_WAIT_SECONDS = 0.5  # the wait before its second try, doubled before each next one
RETRY_WAIT_MAX_SECONDS = 5.0  # and never longer than this
GIVE_UP = ("not_found", "conflict", "invalid", "refused")


def choose_arrival(rng: random.Random, profile: Profile) -> tuple[str, str, str]:
    """Where the next session comes from and what runs it: (genesis, runtime, model)."""
    genesis = rng.choices(list(GENESIS_MIX), weights=list(GENESIS_MIX.values()))[0]
    if rng.random() < profile.codex_share:
        return genesis, "codex", rng.choice(CODEX_MODELS)
    return genesis, "claude_code", rng.choice(CLAUDE_MODELS)


class Fleet:
    def __init__(self, client: RuntimeClient, profile: Profile, seed: int, accounts: AccountPool, disk: SimDisk,
                 ledger: Ledger, *, name: str = "sim"):
        self.client, self.profile, self.seed = client, profile, seed
        self.accounts, self.disk, self.ledger, self.name = accounts, disk, ledger, name
        self.rng = random.Random(f"{seed}:arrivals")
        self._rngs: dict[int, random.Random] = {}
        self._turns: dict[int, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._idle_since: dict[int, float] = {}
        self._triggers: dict[str, int] = {}
        self._arrivals = 0
        self.max_sessions: int | None = None  # the policy's cap, as last read (the invariant checks set it)
        self.closing = False
        # Quiet: no new sessions, and a finished turn is followed by nothing (a scenario lets the
        # pool drain, so a reset shows as room and the paused come back).
        self.quiet = False
        self.retry_wait = RETRY_WAIT_SECONDS

    # ---- arrivals -----------------------------------------------------------------------

    async def setup(self) -> None:
        for kind in TRIGGER_GENESES:
            view = await self._retry(lambda k=kind: self.client.call(CREATE_TRIGGER, CreateTrigger(
                kind=k, name=f"sim {k}", prompt=f"Handle the {k} event",
                idempotency_key=f"{self.name}-{self.seed}-trigger-{k}")))
            if view is not None:
                self._triggers[kind] = view.id

    def live_sessions(self) -> int:
        return sum(1 for s in self.ledger.sessions.values() if not s.archived)

    async def arrive(self) -> SessionRecord | None:
        """One session arrives: from a trigger (slack, github_issue, schedule) or spawned (web_ui, api)."""
        self._arrivals += 1
        n = self._arrivals
        genesis, runtime, model = choose_arrival(self.rng, self.profile)
        codex = runtime == "codex"
        key, prompt = f"{self.name}-{self.seed}-arrival-{n}", f"sim:{n}:task"
        if genesis in self._triggers and not codex:
            call = lambda: self.client.call(FIRE_TRIGGER, FireTrigger(  # noqa: E731 - one request, retried by _retry
                trigger_id=self._triggers[genesis], prompt=prompt, title=f"sim {genesis} #{n}", idempotency_key=key))
        else:
            precedence = self.rng.randint(*self.profile.precedences) if self.profile.precedences else None
            call = lambda: self.client.call(spot.SPAWN, spot.SpawnSession(  # noqa: E731 - one request, retried by _retry
                genesis=genesis, runtime=runtime, harness=runtime, model=model, title=f"sim {genesis} #{n}",
                prompt=prompt, idempotency_key=key, precedence=precedence))
        result = await self._retry(call)
        if result is None:
            self.ledger.counts["spawn_failed"] += 1
            return None
        record = self.adopt(result.session, spawned=True, arrival=n)
        record.sent_prompts.append(prompt)
        self.ledger.counts["spawned"] += 1
        if result.turn is not None:
            self.ledger.outcomes[result.turn.outcome] += 1
            if result.turn.outcome in ("admitted", "passed"):
                self.ledger.admitted[prompt] = (record.session_id, utc_now())
        return record

    def adopt(self, view: spot.SessionView, *, spawned: bool = False, arrival: int | None = None) -> SessionRecord:
        """The fleet's record of a session, made the first time it hears of it (a spawn of its own,
        or a start_turn for a session someone else started: a backlog pull, an operator)."""
        record = self.ledger.sessions.get(view.id)
        if record is not None:
            return record
        account = self.accounts.assign() if view.runtime == "claude_code" else None
        record = SessionRecord(view.id, view.genesis, view.runtime, view.model, account, spawned,
                               spot_class=view.priority_class == "spot", precedence=view.precedence)
        self.ledger.sessions[view.id] = record
        self._rngs[view.id] = random.Random(f"{self.seed}:{'arrival' if arrival else 'session'}:{arrival or view.id}")
        large = self.profile.large_clone_bytes if self._rngs[view.id].random() < self.profile.large_clone_share else 0
        self._spawn(self._clone(record, large))
        return record

    async def _clone(self, record: SessionRecord, large_bytes: int) -> None:
        """Clone (git runs in a thread: the loop keeps serving), then report it, as a runtime does."""
        made = await asyncio.to_thread(self.disk.make_clone, record.session_id, large_bytes=large_bytes)
        if made is not None:
            record.clone_path, record.transcript_dir = made
            await self.client.report_clone(record.session_id, record.clone_path, host=self.disk.host)

    # ---- commands -----------------------------------------------------------------------

    async def obey(self, command: Command) -> None:
        if self.closing:  # raised: the client naks it, and the command waits for a runtime that runs
            raise RuntimeError("the simulated fleet is stopping")
        self.ledger.commands[command.kind] += 1
        match command.payload:
            case StartTurn() as start:
                await self._start(start, command.occurred_at)
            case StopTurn() as stop:
                await self._stop(stop)
            case SampleQuota(accounts=names):
                await self.report_readings(names)

    async def _start(self, start: StartTurn, decided_at: datetime) -> None:
        record = self.ledger.sessions.get(start.session_id)
        if record is None:
            view = await self._retry(lambda: self.client.call(spot.GET_SESSION, spot.SessionRef(
                session_id=start.session_id)))
            if view is None:
                raise RuntimeError(f"session {start.session_id} could not be read; the command comes again")
            record = self.adopt(view)
        if record.turn_in_flight:
            self.ledger.violation("one_turn_in_flight", session_id=record.session_id, turn_kind=start.turn_kind)
            return
        if record.archived:
            self.ledger.counts["start_after_archive"] += 1
            record.archived = False  # unarchived by someone: it runs again
        if start.prompt and start.prompt.startswith("sim:"):
            record.delivered_prompts.append(start.prompt)
        self._check_cap(record, start.turn_kind)
        if start.turn_kind == "restart":
            self.ledger.restarts.append(Restart(asyncio.get_running_loop().time(), record.session_id, record.precedence,
                                                decided_at))
        self._idle_since.pop(record.session_id, None)
        if self.ledger.parked.pop(record.session_id, None) is not None:
            self.ledger.counts["auth_unparked"] += 1
        self.ledger.turn_started(record)
        self._turns[record.session_id] = asyncio.create_task(self._turn(record), name=f"turn-{record.session_id}")

    def _check_cap(self, record: SessionRecord, kind: str) -> None:
        """A gated spot turn starts only with a free slot: the spot sessions already running (the
        fleet's count never exceeds the control plane's) stay under max_sessions."""
        if self.max_sessions is None or not record.spot_class or record.runtime != "claude_code" \
                or kind not in GATED_KINDS:
            return
        running = sum(1 for s in self.ledger.sessions.values()
                      if s.turn_in_flight and s.spot_class and s.runtime == "claude_code")
        self.ledger.counts["cap_checks"] += 1
        if running >= self.max_sessions:
            self.ledger.violation("max_sessions", session_id=record.session_id, running=running,
                                  max_sessions=self.max_sessions, turn_kind=kind)

    async def _stop(self, stop: StopTurn) -> None:
        """A paused session stops spending at once: its turn task is cancelled before the report."""
        turn = self._turns.pop(stop.session_id, None)
        if turn is not None:
            turn.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await turn
        record = self.ledger.sessions.get(stop.session_id)
        if record is not None:
            record.turn_in_flight = False
        self.ledger.counts["stopped"] += 1
        self.ledger.stopped_sessions.add(stop.session_id)
        self.ledger.stop_reasons[stop.reason[:80]] += 1
        await self.client.report_status(stop.session_id, "waiting")

    async def report_readings(self, names: list[str] | None = None) -> None:
        now = utc_now()
        self.accounts.tick(now)
        for name in names or list(self.accounts.accounts):
            account = self.accounts.accounts.get(name)
            if account is None:
                continue
            await self.client.report_quota(
                account=name, status=account.status, read_at=now,
                five_hour=WindowReadingIn(utilization=account.five_hour.utilization,
                                          resets_at=account.five_hour.resets_at),
                seven_day=WindowReadingIn(utilization=account.seven_day.utilization,
                                          resets_at=account.seven_day.resets_at))
            self.ledger.counts["quota_readings"] += 1

    # ---- a turn, and what follows it ----------------------------------------------------

    async def _turn(self, record: SessionRecord) -> None:
        rng, p, sid = self._rngs[record.session_id], self.profile, record.session_id
        loop = asyncio.get_running_loop()
        end = loop.time() + rng.uniform(*p.turn_seconds)
        n = 0
        while loop.time() < end:
            await asyncio.sleep(rng.uniform(*p.request_every))
            account = self.accounts.accounts.get(record.account or "")
            if account is not None and account.status == "needs_reauth":
                record.turn_in_flight = False
                self._turns.pop(sid, None)
                await self._park(record)
                return
            n += 1
            await self._spend(record, rng, n)
        record.turn_in_flight = False
        self._turns.pop(sid, None)
        await self.client.report_status(sid, "needs_input")
        self._spawn(self._after_turn(record))

    async def _spend(self, record: SessionRecord, rng: random.Random, n: int) -> None:
        p, sid = self.profile, record.session_id
        tokens_in, tokens_out = rng.randint(*p.tokens_in), rng.randint(*p.tokens_out)
        await self.client.report_spend(request_id=f"{self.name}-{self.seed}-{sid}-{record.turns}-{n}", session_id=sid,
                                       harness=record.runtime, model=record.model, input_tokens=tokens_in,
                                       output_tokens=tokens_out)
        dollars = request_dollars(record.model, tokens_in, tokens_out)
        used = self.ledger.tokens[record.model]
        used[0] += tokens_in
        used[1] += tokens_out
        record.spend_requests += 1
        record.spend_dollars += dollars
        if record.account:
            self.accounts.accounts[record.account].charge(dollars)
        lines = [LogLine(sid, rng.choices([lv for lv, _ in LEVELS], weights=[w for _, w in LEVELS])[0],
                         f"{LOG_MARK}turn {record.turns} request {n}: {tokens_in} in, {tokens_out} out ({i + 1})")
                 for i in range(rng.randint(*p.log_lines_per_request))]
        await self.client.send_log_lines(lines)
        self.ledger.log_lines[sid] += len(lines)
        self.disk.append_transcript(record.transcript_dir, f'{{"turn": {record.turns}, "request": {n}}}')

    async def _after_turn(self, record: SessionRecord) -> None:
        rng, p, sid = self._rngs[record.session_id], self.profile, record.session_id
        roll = rng.random()
        if self.quiet:
            self._idle_since[sid] = asyncio.get_running_loop().time()
        elif roll < p.p_follow_up:
            await asyncio.sleep(rng.uniform(*p.think_seconds))
            await self._ask(record, "follow_up", f"sim:{sid}:follow-up-{record.turns}")
        elif roll < p.p_follow_up + p.p_sleep:
            prompt = f"sim:{sid}:wake-{record.turns}"
            until = utc_now() + timedelta(seconds=rng.uniform(*p.sleep_seconds))
            if await self._retry(lambda: self.client.pause_until(sid, until, prompt=prompt)) is not None:
                record.sent_prompts.append(prompt)
                self.ledger.counts["sleeps"] += 1
        elif roll < p.p_follow_up + p.p_sleep + p.p_archive:
            await self.archive(record)
        elif roll < p.p_follow_up + p.p_sleep + p.p_archive + p.p_auth_outage and record.account:
            self.accounts.lose_credentials(record.account, utc_now(), rng.uniform(*p.auth_outage_seconds))
            self.ledger.counts["auth_outages"] += 1
            await self.report_readings([record.account])
            await self._park(record)
        else:
            self._idle_since[sid] = asyncio.get_running_loop().time()

    async def _ask(self, record: SessionRecord, kind: str, prompt: str) -> None:
        if record.archived:
            return
        key = f"{self.name}-{self.seed}-{prompt}"
        loop = asyncio.get_running_loop()
        asked = loop.time()
        decision = await self._retry(lambda: self.client.request_turn(record.session_id, kind, prompt=prompt,
                                                                      idempotency_key=key))
        if decision is not None:
            self.ledger.turn_latencies.append(loop.time() - asked)
            if decision.starts:
                self.ledger.admitted[prompt] = (record.session_id, utc_now())
            record.sent_prompts.append(prompt)
            self.ledger.outcomes[decision.outcome] += 1

    async def _park(self, record: SessionRecord) -> None:
        if await self._retry(lambda: self.client.park_for_auth_outage(record.session_id, record.account)):
            self.ledger.counts["auth_parks"] += 1
            self.ledger.parked[record.session_id] = (utc_now(), record.account)

    async def archive(self, record: SessionRecord) -> None:
        record.archived = True
        self._idle_since.pop(record.session_id, None)
        await self.client.report_status(record.session_id, "archived")
        self.ledger.counts["archived"] += 1

    async def archive_idle(self) -> None:
        """Nobody answered: an idle session is archived after a while, as a person would."""
        now = asyncio.get_running_loop().time()
        for sid, since in list(self._idle_since.items()):
            record = self.ledger.sessions[sid]
            if now - since >= self.profile.idle_archive_seconds and not record.turn_in_flight:
                await self.archive(record)

    # ---- plumbing -----------------------------------------------------------------------

    async def _retry(self, call):  # type: ignore[no-untyped-def]  # call: any RPC coroutine factory
        """The call's answer, or None. `unavailable`/`busy` are repeated (each call reuses its key)."""

        async def counted():  # type: ignore[no-untyped-def]  # returns whatever the call answers
            try:
                return await call()
            except RuntimeRequestError as exc:
                self.ledger.counts[f"rpc_{exc.code}"] += 1
                raise

        retrying = AsyncRetrying(
            stop=stop_after_attempt(RETRIES),
            wait=wait_exponential(multiplier=self.retry_wait, max=RETRY_WAIT_MAX_SECONDS),
            retry=retry_if_exception(lambda exc: isinstance(exc, RuntimeRequestError) and exc.code not in GIVE_UP),
            retry_error_callback=lambda _state: None)  # not answered after RETRIES tries
        try:
            return await retrying(counted)
        except RuntimeRequestError as exc:  # a refusal in GIVE_UP: asking again changes nothing
            log.info("the control plane refused a request", extra={"code": exc.code, "error": str(exc)})
            return None

    def _spawn(self, coro) -> None:  # type: ignore[no-untyped-def]  # coro: any coroutine
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.ledger.counts["task_errors"] += 1
            # ERROR without a page: the simulator is a runtime, outside the control plane, with no
            # pager; its log (logs/sim.log under zimmer up) and the ledger's task_errors carry it.
            log.error("a simulated session's task failed", exc_info=task.exception())

    async def close(self) -> None:
        self.closing = True
        for task in [*self._turns.values(), *self._background]:
            task.cancel()
        await asyncio.gather(*self._turns.values(), *self._background, return_exceptions=True)
