"""The one admission path: turns, re-checks and spawns that start at once are decided in
batches, in one transaction each, under the one admission lock (seed 004 "Every turn is gated";
DESIGN §9). A spawn that starts is inserted and gets its first turn in the same transaction as
every other decision of its batch, so concurrent spawns are counted against the same slots as
turns, and the batch holds one database connection however many requests it carries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeVar

from zimmer_common.batching import LockedBatcher, Take
from zimmer_common.contracts.spot import SESSION_CREATED, SessionEvent, SessionView, SpawnResult, SpawnSession, TurnResult
from zimmer_common.errors import ZimmerError
from zimmer_common.unit_of_work import UnitOfWork, UnitsOfWork
from zimmer_spot_gate.domain.classes import originate
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, TurnKind
from zimmer_spot_gate.domain.precedence import above_top_of_spot
from zimmer_spot_gate.handlers.turns import Result, TurnGate, TurnRequest
from zimmer_spot_gate.store import quota
from zimmer_spot_gate.store import sessions as store


@dataclass(frozen=True)
class SpawnRequest:
    """A spawn, with what a trigger stamps on it (seed 004 "Where the class comes from")."""

    req: SpawnSession
    default_genesis: Genesis = Genesis.API
    trigger_id: int | None = None
    trigger_class: SchedulingClass | None = None
    trigger_precedence: int | None = None


Item = TurnRequest | SpawnRequest
Answer = Result | SpawnResult | ZimmerError
A = TypeVar("A", TurnResult, SpawnResult)


class Admissions:
    def __init__(self, units: UnitsOfWork, gate: TurnGate):
        self.units = units
        self.gate = gate
        self.batcher: LockedBatcher[Item, Answer] = LockedBatcher(self._run, name="spot-gate admissions")

    async def spawn_session(self, item: SpawnRequest) -> SpawnResult:
        """The door every spawn comes through. Idempotent on `idempotency_key`: the same key returns
        the same session, never a second. A spawn that starts at once goes through the batched
        admission with every other turn; one that does not is inserted in a unit of work of its own."""
        if item.req.start:
            return await self.spawn(item)
        async with self.units.begin() as uow:
            view, created, first = await insert_session(uow, item, (await quota.policy(uow.conn)).overrides)
            answer = first or SpawnResult(session=view, created=created)
            await store.save_spawn_answers(uow.conn, first_answers([item], [answer]))
        return answer

    async def turn(self, request: TurnRequest) -> TurnResult:
        return await self._decided(request, TurnResult)

    async def spawn(self, request: SpawnRequest) -> SpawnResult:
        return await self._decided(request, SpawnResult)

    async def _decided(self, item: Item, answer: type[A]) -> A:
        """`item`'s answer from its batch: the refusal raised, or the result it asks for."""
        out = await self.batcher.submit(item)
        if isinstance(out, ZimmerError):
            raise out
        assert isinstance(out, answer)
        return out

    async def _run(self, take: Take[Item]) -> list[Answer]:
        """The requests waiting once this transaction holds the admission lock, decided together.
        The next batch opens its transaction and queues on the lock meanwhile, so BEGIN and the
        lock are not between two batches (`LockedBatcher`)."""
        async with self.units.begin() as uow:
            conn = uow.conn
            pool = await self.gate.lock_with_pool(conn)
            items = take()
            if not items:
                return []
            answers: list[Answer | None] = [None] * len(items)
            # A spawn's class needs the policy's overrides; otherwise the gate reads the policy
            # with the fleet, in one round trip.
            policy = await quota.policy(conn) if any(isinstance(item, SpawnRequest) for item in items) else None
            # Spawns first, each in a savepoint (a refused one, e.g. an unknown parent, must not
            # undo the batch); then every turn, the new sessions' first turns among them.
            turns: list[tuple[int, TurnRequest]] = []
            spawned: dict[int, SessionView] = {}
            for i, item in enumerate(items):
                if isinstance(item, TurnRequest):
                    turns.append((i, item))
                    continue
                assert policy is not None
                try:
                    async with conn.begin_nested():
                        view, created, first = await insert_session(uow, item, policy.overrides)
                except ZimmerError as exc:
                    answers[i] = exc
                    continue
                if created and item.req.start:
                    spawned[i] = view
                    turns.append((i, TurnRequest(view.id, TurnKind.FIRST_START, item.req.prompt)))
                else:
                    answers[i] = first or SpawnResult(session=view, created=created)

            async def decide(indices: list[int]) -> list[Result]:
                return await self.gate.process(conn, [turns[j][1] for j in indices], policy, locked=pool)

            outcomes = await uow.keyed_batch([t.key for _, t in turns], decide, TurnResult)
            for (i, _), out in zip(turns, outcomes, strict=True):
                if i in spawned:
                    answers[i] = (out if isinstance(out, ZimmerError) else
                                  SpawnResult(session=out.session if out else spawned[i], created=True, turn=out))
                else:
                    answers[i] = out
            await store.save_spawn_answers(conn, first_answers(items, answers))
        return answers


def first_answers(items: list[Any], answers: list[Any]) -> dict[int, str]:
    """The answers of keyed spawns that made their session, to keep for their retries."""
    return {a.session.id: a.model_dump_json() for item, a in zip(items, answers, strict=True)
            if isinstance(item, SpawnRequest) and item.req.idempotency_key and isinstance(a, SpawnResult) and a.created}


async def insert_session(uow: UnitOfWork, item: SpawnRequest, overrides: Any
                         ) -> tuple[SessionView, bool, SpawnResult | None]:
    """In `uow`, insert the session (announcing it), or find the one its idempotency key already made.
    Returns its view, whether it is new, and (found by its key) the first answer, whole, when kept."""
    conn, req = uow.conn, item.req
    if req.idempotency_key:
        existing = await store.by_idempotency_key(conn, req.idempotency_key)
        if existing is not None:
            first = SpawnResult.model_validate(existing.spawn_answer) if existing.spawn_answer else None
            return store.to_view(existing, overrides), False, first
    parent = await store.lineage(conn, req.parent_session_id, "parent_session_id") \
        if req.parent_session_id is not None else None
    if req.forked_from_session_id is not None:  # beside a parent too: an unknown one is a 422, not a foreign key's 500
        forked = await store.lineage(conn, req.forked_from_session_id, "forked_from_session_id")
        parent = parent if parent is not None else forked
    origin = originate(lineage=parent, declared_genesis=Genesis(req.genesis) if req.genesis else None,
                       declared_class=SchedulingClass(req.scheduling_class) if req.scheduling_class else None,
                       declared_precedence=req.precedence, default_genesis=item.default_genesis,
                       trigger_class=item.trigger_class, trigger_precedence=item.trigger_precedence)
    if req.precedence is None and (req.precedence_above_top_spot or (
            parent is None and origin.genesis is Genesis.WEB_UI and origin.scheduling_class is SchedulingClass.SPOT)):
        # "Run as spot", and a web-UI spot submission (a child lands above its parent instead):
        # SLOT_GAP above the top of the spot queue.
        origin = replace(origin, precedence=above_top_of_spot(await store.top_of_spot(conn, overrides)))
    row = await store.insert(conn, req, origin, item.trigger_id)
    if row is None:  # a concurrent spawn with the same key committed first
        raced = await store.by_idempotency_key(conn, req.idempotency_key or "")
        assert raced is not None
        first = SpawnResult.model_validate(raced.spawn_answer) if raced.spawn_answer else None
        return store.to_view(raced, overrides), False, first
    view = store.to_view(row, overrides)
    await uow.emit(SESSION_CREATED, "session_created",
                   SessionEvent(session=view, spawned_by=req.metadata.get("spawned_by")))
    return view, True, None
