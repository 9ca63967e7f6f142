"""MCP tools of the spot gate, named as in seed 004's "MCP parity" table.

`core` (read-only): get_session, quick_search_sessions, get_costs, search_triggers.
`sessions`: start_session, action_session, action_trigger.
`health`: get_spot_policy, action_spot_policy (quota posture is a deployment matter, not a
session's, so these are not in `sessions`).
`gate_decisions`: get_gate_decisions.

Each tool is one RPC to spot-gate. Seed 004's session operations are here, start now among them
(`action_session` `start_now`, and as a side effect of `change_scheduling_class` to priority): a
held spot session is asked again, still gated, so it is no queue jump. The backlog's discretionary
operations (pin, place, remove, start an item now) have no tool at all (DESIGN §6). An argument
that does not apply to the chosen action is refused naming it rather than silently ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from zimmer_common.bus import Bus
from zimmer_common.contracts import spot as c
from zimmer_common.contracts import spot_policy as p
from zimmer_common.contracts.fields import IdempotencyKey, Name, Prompt, ShortText, Time, Title
from zimmer_common.contracts.runtime import SessionStatusName
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.mcp.registry import CORE, tool
from zimmer_gateway.routes.common import ID_MAX, Precedence
from zimmer_gateway.web.quota_words import accounts_line

SessionId = Annotated[int, Field(ge=1, le=ID_MAX, description="The session's id")]
TriggerId = Annotated[int, Field(ge=1, le=ID_MAX, description="The trigger's id")]
OptPrecedence = Annotated[Precedence | None, Field(description="Rank in the spot queue: higher runs first")]
Limit = Annotated[int, Field(ge=1, le=500, description="At most this many rows")]
Offset = Annotated[int, Field(ge=0, le=ID_MAX, description="Where the page starts: the `next_offset` of the page before")]
Reserve = Annotated[float | None, Field(ge=0, le=100, description="Percent of the window kept for priority work")]
ClassOrDerive = Literal["priority", "spot", "derive"]


def _bus(service: Service) -> Bus:
    if service.bus is None:
        raise ZimmerError(ErrorCode.UNAVAILABLE, "the gateway is not connected to the bus yet")
    return service.bus


def _check(action: str, given: dict[str, Any], *, needs: tuple[str, ...] = (), allows: tuple[str, ...] = ()) -> None:
    """Refuse, naming the field, a missing required argument or one that does not apply."""
    for name in needs:
        if given.get(name) is None:
            raise ZimmerError(ErrorCode.INVALID, f"{action} needs {name}", {"field": name})
    for name, value in given.items():
        if value is not None and name not in needs and name not in allows:
            raise ZimmerError(ErrorCode.INVALID, f"{name} does not apply to {action}", {"field": name})


# ---- core -------------------------------------------------------------------------------


class SessionAction(c.SessionView):
    """The session after the action; for start_now also what it did and why."""

    did: str | None = Field(None, description="start_now: rechecked, resumed, started, nudged, running, or held "
                                               "(nothing changed)")
    sentence: str | None = Field(None, description="start_now: what happened, or why the gate holds it")


class SessionReport(c.SessionView):
    summary: str = Field(description="The session's class, rank and hold in plain words")


def describe_session(s: c.SessionView) -> str:
    how = "its own" if s.scheduling_class else "derived from its genesis"
    parts = [f"Session {s.id} is a {s.priority_class} session (genesis {s.genesis}, class {how}), "
             f"precedence {s.precedence}, status {s.status}."]
    if s.paused_until:
        parts.append(f"**Paused:** yes, until {s.paused_until.isoformat()}: nothing starts it before then; skip it.")
    if s.pause_sentence:
        parts.append(s.pause_sentence)
    if s.spot_hold_reason:
        when = s.spot_hold_retry_at.isoformat() if s.spot_hold_retry_at else "not scheduled"
        parts.append(f"The spot gate is holding its {s.held_turn_kind or 'next'} turn ({s.spot_hold_reason}; "
                     f"hold {s.spot_hold_count}); the next re-check is at {when}. Making it priority starts it now.")
    if s.queued_prompt_coming:
        parts.append(_still_coming(s))
    return " ".join(parts)


def _still_coming(s: c.SessionView) -> str:
    """Where a queued prompt is and what delivers it: the held turn goes when the gate admits it; a
    prompt queued behind a running turn goes at that turn's boundary, gated then."""
    queued = s.enqueued_messages
    if s.held_turn_kind is not None:
        behind = f", and {queued} more queued behind it" if queued else ""
        return (f"Its queued prompt is still coming{behind}: the gate keeps it and delivers it when the turn is "
                "admitted, so nothing needs to be sent again.")
    if s.status == "running":
        return (f"{queued} queued prompt(s) are still coming: each is delivered at the end of the turn in flight "
                "(its turn boundary), gated then, so nothing needs to be sent again.")
    return (f"{queued} queued prompt(s) are still coming: they are delivered in order at its next turn, so nothing "
            "needs to be sent again.")


@tool(group=CORE, read_only=True, destructive=False, idempotent=True)
async def get_session(service: Service, session_id: SessionId) -> SessionReport:
    """One session: genesis, scheduling class (stored and resolved), precedence, status, and its
    spot hold (reason, retry time, count) with whether a queued prompt is still coming."""
    view = await _bus(service).request(c.GET_SESSION, c.SessionRef(session_id=session_id))
    return SessionReport(**view.model_dump(), summary=describe_session(view))


@tool(group=CORE, read_only=True, destructive=False, idempotent=True)
async def quick_search_sessions(
    service: Service,
    status: Annotated[list[SessionStatusName] | None, Field(description="Any of these statuses")] = None,
    priority_class: Annotated[c.ClassName | None, Field(description="The resolved class")] = None,
    genesis: Annotated[list[c.GenesisName] | None, Field(description="Any of these geneses")] = None,
    order: Annotated[Literal["precedence", "created_at", "updated_at"],
                     Field(description="precedence: the order the spot queue is worked (highest first, "
                                       "oldest within a tie); the others newest first")] = "created_at",
    limit: Limit = 50,
    offset: Offset = 0,
) -> c.SessionList:
    """Search sessions by status, class and genesis. The spot queue in the order it will be worked:
    status ["waiting"], priority_class "spot", order "precedence". A row with `paused_until` set is
    **Paused:** yes: a wall-clock pause is still ahead of it, nothing starts it before then, and
    restart refuses it; skip it and take the next candidate. Fewer than `limit` rows when their
    prompts fill one answer: follow `next_offset` (never `offset + limit`) until it is null."""
    return await _bus(service).request(c.LIST_SESSIONS, c.SessionQuery(
        status=status, priority_class=priority_class, genesis=genesis, order=order, limit=limit, offset=offset))


@tool(group=CORE, read_only=True, destructive=False, idempotent=True)
async def get_costs(service: Service) -> p.CostsView:
    """Burn rate ($/min) of each harness + model, spend over the 5-hour and 7-day windows, list prices."""
    return await _bus(service).request(p.GET_COSTS, p.CostsQuery())


@tool(group=CORE, read_only=True, destructive=False, idempotent=True)
async def search_triggers(
    service: Service, kind: p.TriggerKindName | None = None,
    name_contains: ShortText | None = None, limit: Limit = 100, offset: Offset = 0,
) -> p.TriggerList:
    """Triggers with their scheduling class and predefined precedence, oldest first. Fewer than
    `limit` when their prompts fill one answer: follow `next_offset` until it is null."""
    return await _bus(service).request(p.SEARCH_TRIGGERS, p.TriggerQuery(kind=kind, name_contains=name_contains,
                                                                         limit=limit, offset=offset))


# ---- sessions ---------------------------------------------------------------------------


@tool(group="sessions", read_only=False, destructive=False, idempotent=False)
async def start_session(
    service: Service,
    prompt: Annotated[Prompt | None, Field(description="The first turn's prompt")] = None,
    title: Title | None = None,
    scheduling_class: Annotated[c.ClassName | None, Field(description="Default: inherited, else the genesis's")] = None,
    precedence: OptPrecedence = None,
    parent_session_id: Annotated[int | None, Field(ge=1, le=ID_MAX)] = None,
    forked_from_session_id: Annotated[int | None, Field(
        ge=1, le=ID_MAX, description="The session this one forks (a fork's only lineage edge): its genesis and "
                                     "class are inherited as from a parent")] = None,
    genesis: Annotated[c.GenesisName | None, Field(
        description="Declared genesis; default: the parent's (or forked session's), else api. A declared genesis "
                    "outranks inheritance: the class is then not inherited")] = None,
    runtime: Literal["claude_code", "codex"] | None = None,
    harness: Name | None = None,
    model: Name | None = None,
    idempotency_key: Annotated[IdempotencyKey | None, Field(description="Same key, same session")] = None,
    precedence_above_top_spot: Annotated[bool | None, Field(
        description='"Run as spot": land 5 above the top of the spot queue (instead of a precedence)')] = None,
) -> c.SpawnResult:
    """Spawn a session and ask the gate for its first turn (`turn.outcome`: admitted, held or passed).
    Any model is accepted (one with no price of its own is priced by family, else at the dearest known
    price). The same idempotency key returns the first answer whole, its turn included."""
    given = dict(prompt=prompt, title=title, scheduling_class=scheduling_class, precedence=precedence,
                 parent_session_id=parent_session_id, forked_from_session_id=forked_from_session_id, genesis=genesis,
                 runtime=runtime, harness=harness, model=model,
                 idempotency_key=idempotency_key, precedence_above_top_spot=precedence_above_top_spot)
    spawn = c.SpawnSession(**{k: v for k, v in given.items() if v is not None})
    return await _bus(service).request(c.SPAWN, spawn)


@tool(group="sessions", read_only=False, destructive=False, idempotent=True)
async def action_session(
    service: Service, session_id: SessionId,
    action: Literal["change_scheduling_class", "change_precedence", "pause_into_spot_queue", "start_now", "restart"],
    scheduling_class: Annotated[ClassOrDerive | None, Field(
        description='For change_scheduling_class; "derive" follows the genesis default again. '
                    "Making a held session priority starts it now")] = None,
    precedence: Annotated[OptPrecedence, Field(
        description="For change_precedence, or alongside change_scheduling_class")] = None,
    resume_with: Annotated[Prompt | None, Field(
        description="pause_into_spot_queue: delivered when the sweep resumes it, in place of the recovery nudge")] = None,
    halt: Annotated[bool | None, Field(
        description="pause_into_spot_queue: stop a running turn now (default: let it finish)")] = None,
    place: Annotated[Literal["top_of_spot"] | None, Field(
        description='change_scheduling_class to "spot": land 5 above the top of the spot queue')] = None,
) -> SessionAction:
    """Change one session's scheduling class or its precedence (all or nothing; making a held, paused
    or never-started session priority starts it now, as start_now would); restart a waiting
    session (restart: refused, naming the pause, for a session paused until a time it has not
    reached: take the next candidate); park it in the
    spot queue (pause_into_spot_queue: it sleeps until the ceiling sweep reaches it in precedence
    order; a priority session becomes spot); or start it now (start_now: a held session's re-check
    pulled forward, a paused session's resume, a session that never ran its first turn with its
    first prompt, otherwise the continue nudge; a spot session still answers to the gate, so this
    is not a queue jump)."""
    given = {"scheduling_class": scheduling_class, "precedence": precedence, "resume_with": resume_with,
             "halt": halt, "place": place}
    bus = _bus(service)
    if action == "pause_into_spot_queue":
        _check(action, given, needs=(), allows=("resume_with", "halt"))
        view = await bus.request(c.PAUSE_INTO_SPOT_QUEUE, c.PauseIntoSpotQueue(
            session_id=session_id, resume_with=resume_with, halt=bool(halt), by="an agent"))
        return SessionAction(**view.model_dump())
    if action == "start_now":
        _check(action, given, needs=())
        done = await bus.request(c.START_NOW, c.StartNow(session_id=session_id))
        return SessionAction(**done.session.model_dump(), did=done.did, sentence=done.sentence)
    if action == "restart":  # refused while a wall-clock pause is ahead: take the next candidate
        _check(action, given, needs=(), allows=("resume_with",))
        turn = await bus.request(c.RESTART, c.RestartSession(session_id=session_id, prompt=resume_with))
        return SessionAction(**turn.session.model_dump(), did=turn.outcome, sentence=turn.decision.sentence
                             if turn.decision else None)
    if action == "change_scheduling_class":
        _check(action, given, needs=("scheduling_class",), allows=("precedence", "place"))
    else:
        _check(action, given, needs=("precedence",))
    view = await bus.request(c.UPDATE_SESSION, c.UpdateSession(
        session_id=session_id, scheduling_class=scheduling_class, precedence=precedence, place=place))
    return SessionAction(**view.model_dump())


class TriggerActionResult(BaseModel):
    action: str
    trigger: p.TriggerView | None = Field(None, description="After create or update")
    spawned: c.SpawnResult | None = Field(None, description="The session an invoke spawned (genesis api)")


@tool(group="sessions", read_only=False, destructive=False, idempotent=False)
async def action_trigger(
    service: Service, action: Literal["create", "update", "invoke"],
    trigger_id: Annotated[TriggerId | None, Field(description="For update and invoke")] = None,
    kind: Annotated[p.TriggerKindName | None, Field(description="For create")] = None,
    name: Name | None = None,
    scheduling_class: Annotated[ClassOrDerive | None, Field(
        description='The class its sessions are stamped with at fire; "derive": none')] = None,
    precedence: OptPrecedence = None,
    clear_precedence: Annotated[bool | None, Field(description="update: drop the predefined precedence")] = None,
    prompt: Prompt | None = None,
    enabled: bool | None = None,
    title: Annotated[Title | None, Field(description="invoke: the session's title")] = None,
    idempotency_key: Annotated[IdempotencyKey | None, Field(
        description="create: same key, same trigger; invoke: same key, same session")] = None,
) -> TriggerActionResult:
    """Create or update a trigger (kind, name, scheduling_class, precedence, prompt, enabled), or
    invoke one by hand. A class change applies to sessions fired from then on, never to earlier ones."""
    given = dict(trigger_id=trigger_id, kind=kind, name=name, scheduling_class=scheduling_class,
                 precedence=precedence, clear_precedence=clear_precedence, prompt=prompt, enabled=enabled,
                 title=title, idempotency_key=idempotency_key)
    bus = _bus(service)
    if action == "create":
        _check(action, given, needs=("kind", "name"),
               allows=("scheduling_class", "precedence", "prompt", "enabled", "idempotency_key"))
        create = p.CreateTrigger(kind=kind, name=name, precedence=precedence, prompt=prompt,  # type: ignore[arg-type]  # pydantic refuses a missing field (the tool's schema says which)
                                 scheduling_class=None if scheduling_class == "derive" else scheduling_class,
                                 enabled=True if enabled is None else enabled, idempotency_key=idempotency_key)
        return TriggerActionResult(action=action, trigger=await bus.request(p.CREATE_TRIGGER, create))
    if action == "update":
        _check(action, given, needs=("trigger_id",),
               allows=("name", "scheduling_class", "precedence", "clear_precedence", "prompt", "enabled"))
        update = p.UpdateTrigger(trigger_id=trigger_id, name=name, scheduling_class=scheduling_class,  # type: ignore[arg-type]  # pydantic refuses a missing field (the tool's schema says which)
                                 precedence=precedence, clear_precedence=bool(clear_precedence), prompt=prompt,
                                 enabled=enabled)
        return TriggerActionResult(action=action, trigger=await bus.request(p.UPDATE_TRIGGER, update))
    _check(action, given, needs=("trigger_id",), allows=("prompt", "title", "idempotency_key"))
    fire = p.FireTrigger(trigger_id=trigger_id, prompt=prompt, title=title,  # type: ignore[arg-type]  # pydantic refuses a missing field (the tool's schema says which)
                         idempotency_key=idempotency_key)
    return TriggerActionResult(action=action, spawned=await bus.request(p.INVOKE_TRIGGER, fire))


# ---- health -----------------------------------------------------------------------------


class SpotPolicyReport(p.PolicyView):
    summary: str = Field(description="The posture in plain words; dollars only for calibrated windows")


def _usd(x: float) -> str:
    x = round(x, 2) + 0.0  # no "-$0.00"
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def _frac(x: float, digits: int = 1) -> str:
    return f"{round(x * 100, digits) + 0.0:.{digits}f}%"


def _duration(minutes: float) -> str:
    m = max(0, round(minutes))
    return f"{m // 1440}d {m % 1440 // 60}h" if m >= 1440 else f"{m // 60}h {m % 60}m" if m >= 60 else f"{m}m"


def _window_line(w: p.WindowPosture) -> str:
    name = {"five_hour": "5-hour", "seven_day": "7-day"}[w.window]
    used = f"{_frac(w.utilization)} used across {w.accounts_averaged} account(s)"
    over = w.spot_budget_left_fraction < 0
    if w.calibrated and w.capacity_dollars is not None:
        left = _usd(w.spot_budget_left_dollars or 0.0)
        budget = (f"no spot budget left ({left[1:]} over)" if over else
                  f"spot budget left {left} ({_frac(w.spot_budget_left_fraction)} of the window)")
        pace = f"fleet burn {_usd(w.fleet_burn)}/min vs sustainable " + (
            "none (over budget)" if over else f"{_usd(w.sustainable_rate)}/min")
        head = (f"{name} window: worth {_usd(w.capacity_dollars)}; {used}; reserve {w.reserve_percent:g}% "
                f"({_usd(w.reserve_dollars or 0.0)})")
    else:
        budget = (f"no spot budget left ({_frac(-w.spot_budget_left_fraction)} of the window over)" if over else
                  f"spot budget left {_frac(w.spot_budget_left_fraction)} of the window")
        pace = f"fleet burn {_frac(w.fleet_burn, 2)}/min vs sustainable " + (
            "none (over budget)" if over else f"{_frac(w.sustainable_rate, 2)}/min of the window")
        head = (f"{name} window: not calibrated (no dollar figure yet, so figures are fractions of the window); "
                f"{used}; reserve {w.reserve_percent:g}% (dollars not calibrated)")
    return f"{head}; {budget}; {pace}; resets in {_duration(w.minutes_to_reset)}."


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if n) or "none"


def describe_policy(v: p.PolicyView) -> str:
    gating = "on" if v.gating_enabled else "off (spot turns are admitted without consulting the gate)"
    lines = [f"Gating {gating}; at most {v.max_sessions} sessions at once, {v.running_slots} slot(s) in use; "
             f"{v.accounts_in_pool} account(s) in the pool."]
    lines += [_window_line(w) for w in v.windows] or [
        "No quota readings yet: both windows are not calibrated and have no figures."]
    lines.append(accounts_line(v))
    lines.append(f"Running: {_counts(v.running)}. Held: {_counts(v.held)}.")
    d = v.decision
    lines.append(f"A new spot session now: {'admitted' if d.allowed else 'held'} ({d.reason}), ceiling "
                 f"{d.ceiling or 'none'}. {d.sentence}")
    lines.append(f"When the pool comes back: {v.unblock.sentence}")
    return "\n".join(lines)


def _report(view: p.PolicyView) -> SpotPolicyReport:
    return SpotPolicyReport(**view.model_dump(), summary=describe_policy(view))


@tool(group="health", read_only=True, destructive=False, idempotent=True)
async def get_spot_policy(service: Service) -> SpotPolicyReport:
    """The spot policy and quota posture: each window in dollars once calibrated (else "not
    calibrated", in fractions), reserve as % and $, spot budget left, fleet burn vs the sustainable
    rate, max sessions, running and held counts, the gate's current decision and ceiling, when the
    pool comes back, and every account (status, windows, reading age). The same decision every surface renders."""
    return _report(await _bus(service).request(p.GET_POLICY, p.PolicyQuery()))


@tool(group="health", read_only=False, destructive=False, idempotent=True)
async def action_spot_policy(
    service: Service,
    action: Literal["set_gating", "promote_genesis", "demote_genesis", "reset_genesis_classes"],
    gating_enabled: Annotated[bool | None, Field(description="set_gating: the gate on or off")] = None,
    reserve_five_hour_percent: Reserve = None,
    reserve_seven_day_percent: Reserve = None,
    max_sessions: Annotated[int | None, Field(ge=0, le=10_000, description="set_gating: sessions at once")] = None,
    genesis: Annotated[c.GenesisName | None, Field(
        description="promote_genesis / demote_genesis: a kind no trigger produces")] = None,
) -> SpotPolicyReport:
    """set_gating (gating_enabled, the two reserve percents, max_sessions: only those given change),
    promote_genesis / demote_genesis (genesis), or reset_genesis_classes. A refused change changes nothing."""
    given = dict(gating_enabled=gating_enabled, reserve_five_hour_percent=reserve_five_hour_percent,
                 reserve_seven_day_percent=reserve_seven_day_percent, max_sessions=max_sessions, genesis=genesis)
    bus = _bus(service)
    if action == "set_gating":
        _check(action, given, allows=("gating_enabled", "reserve_five_hour_percent", "reserve_seven_day_percent",
                                      "max_sessions"))
        given.pop("genesis")
        return _report(await bus.request(p.SET_POLICY, p.SetPolicy(**given)))
    _check(action, given, needs=("genesis",) if action != "reset_genesis_classes" else ())
    return _report(await bus.request(p.GENESIS_ACTION, p.GenesisAction(action=action, genesis=genesis)))


# ---- gate_decisions ---------------------------------------------------------------------


@tool(group="gate_decisions", read_only=True, destructive=False, idempotent=True)
async def get_gate_decisions(
    service: Service, session_id: SessionId, limit: Limit = 50,
    since: Annotated[Time | None, Field(description="Only decisions at or after this instant")] = None,
    until: Annotated[Time | None, Field(description="Only decisions at or before this instant")] = None,
    at: Annotated[Time | None, Field(
        description='The one decision in force at this instant ("why was it held at 14:02?"); alone')] = None,
) -> c.GateDecisionList:
    """The gate's decision log for one session, newest first: every outcome that took it onto, kept
    it off or took it off a slot (`event`: turn, ceiling_pause, ceiling_kept, ceiling_resume,
    start_now, promote, restart, wake_stand_down, auth_park, auth_unpark), allowed or held, reason,
    ceiling, the sentence shown to people and the per-window numbers behind it."""
    return await _bus(service).request(c.GATE_DECISIONS, c.GateDecisionQuery(
        session_id=session_id, limit=limit, since=since, until=until, at=at))

