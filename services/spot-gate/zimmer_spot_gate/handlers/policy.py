"""The spot policy, triggers and costs: reads render the same gate decision every surface shows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from zimmer_common import idempotency
from zimmer_common.byte_pages import ANSWER_ROWS_MAX_BYTES, next_offset
from zimmer_common.contracts.spot import SpawnResult, SpawnSession
from zimmer_common.contracts.spot_policy import (
    AccountView,
    AccountWindowView,
    BurnRateView,
    CostsQuery,
    CostsView,
    CreateTrigger,
    DecidedFor,
    FireTrigger,
    GenesisAction,
    GenesisClassView,
    ModelPricing,
    PolicyQuery,
    PolicyView,
    SetPolicy,
    TriggerList,
    TriggerQuery,
    TriggerView,
    UnblockView,
    UpdateTrigger,
    WindowPosture,
)
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_common.unit_of_work import UnitsOfWork
from zimmer_spot_gate.config import PriceBook
from zimmer_spot_gate.domain.accounts import STALE_AFTER, AccountState, AccountWindow, account_states
from zimmer_spot_gate.domain.classes import (
    DEFAULT_GENESIS_CLASS,
    TRIGGER_KINDS,
    ClassRuleError,
    resolve_class,
    set_genesis_override,
)
from zimmer_spot_gate.domain.gate import window_numbers
from zimmer_spot_gate.domain.model import Genesis, SchedulingClass, Window
from zimmer_spot_gate.domain.pool import next_weekly_reset, pooled_windows, unblock_state
from zimmer_spot_gate.domain.prices import CURRENCY, spends_against_claude
from zimmer_spot_gate.handlers.admissions import Admissions, SpawnRequest
from zimmer_spot_gate.handlers.snapshot import DEFAULT_HARNESS, DEFAULT_MODEL, read_inputs
from zimmer_spot_gate.handlers.turns import decision_view
from zimmer_spot_gate.store import quota, triggers
from zimmer_spot_gate.store.quota import WINDOW_SPAN
from zimmer_spot_gate.store.sessions import class_expr


def _account_window(w: AccountWindow | None) -> AccountWindowView | None:
    return None if w is None else AccountWindowView(utilization=w.utilization, resets_at=w.resets_at,
                                                    rolled_over=w.rolled_over, counted_as=w.counted_as)


def _account_view(a: AccountState) -> AccountView:
    return AccountView(account=a.account, status=a.status.value, serving=a.serving, read_at=a.read_at,
                       reading_age_seconds=a.age_seconds, stale=a.stale,
                       five_hour=_account_window(a.windows.get(Window.FIVE_HOUR)),
                       seven_day=_account_window(a.windows.get(Window.SEVEN_DAY)),
                       out_of_capacity=a.out_of_capacity, back_at=a.back_at)


class PolicyOps:
    def __init__(self, units: UnitsOfWork, now: Callable[[], datetime], admissions: Admissions, prices: PriceBook,
                 rows_budget: Callable[[], int] = lambda: ANSWER_ROWS_MAX_BYTES):
        self.units = units
        self.now = now
        self.admissions = admissions  # a trigger's spawn goes through the one admission path
        self.prices = prices
        # Bytes one answer's rows may take on the bus the service answers on.
        self.rows_budget = rows_budget

    # ---- policy -------------------------------------------------------------------------

    async def get(self, _q: PolicyQuery | None = None) -> PolicyView:
        async with self.units.read() as conn:
            return await self._view(conn)

    async def _view(self, conn: AsyncConnection) -> PolicyView:
        now = self.now()
        inputs, fleet = await read_inputs(conn, now)
        parts, policy = inputs.parts, inputs.policy
        assert parts is not None
        # What the gate says now to a new spot session as a spawn naming no model gets it: the same
        # function over the same inputs an admission decides with, so the two cannot disagree.
        candidate = inputs.default_candidate()
        decision = inputs.decide(fleet, candidate)
        windows = []
        calibrated_at = await quota.calibrated_at(conn)
        pooled = pooled_windows(parts.readings, now, parts.pool_size)
        for w in parts.windows:
            n = window_numbers(w, policy.policy, fleet, candidate)
            reserve = policy.policy.reserve.get(w.window, 0.0)
            windows.append(WindowPosture(
                window=w.window.value, calibrated=n.calibrated,
                capacity_dollars=n.capacity if n.calibrated else None, utilization=n.utilization,
                accounts_averaged=parts.accounts_averaged, reserve_percent=round(reserve * 100, 3),
                reserve_dollars=reserve * n.capacity if n.calibrated else None,
                spot_budget_dollars=n.budget if n.calibrated else None,
                spot_budget_left_dollars=n.left if n.calibrated else None,
                spot_budget_left_fraction=n.left / n.capacity, minutes_to_reset=n.minutes_to_reset,
                sustainable_rate=n.sustainable_rate, fleet_burn=n.fleet_burn, fleet_burn_estimated=not n.calibrated,
                calibrated_at=calibrated_at.get(w.window) if n.calibrated else None,
                reset_recorded=pooled[w.window].reset_known if w.window in pooled else False))
        running, held = await triggers.counts(conn, class_expr(policy.overrides))
        # Triggers carry prompts: the view holds those that fit, never failing for their size.
        shown, total = await triggers.search(conn, TriggerQuery(limit=500), self.rows_budget())
        unblock = unblock_state(parts.readings, now)
        weekly = next_weekly_reset(parts.readings, now)
        return PolicyView(
            gating_enabled=policy.policy.gating_enabled, max_sessions=policy.policy.max_sessions, windows=windows,
            reserve_percent={w.value: round(policy.policy.reserve.get(w, 0.0) * 100, 3) for w in Window},
            accounts_in_pool=parts.pool_size, running=running, held=held, paused=await triggers.paused_counts(conn),
            running_slots=fleet.running_slots,
            decision=decision_view(decision),
            decided_for=DecidedFor(harness=DEFAULT_HARNESS, model=DEFAULT_MODEL,
                                   burn_per_minute=candidate.burn_dollars_per_minute),
            unblock=UnblockView(state=unblock.state, at=unblock.at, accounts_out=unblock.accounts_out,
                                accounts_read=unblock.accounts_read, sentence=unblock.sentence,
                                next_weekly_reset_at=weekly.at, accounts_week_spent=weekly.accounts_week_spent),
            genesis_classes=[GenesisClassView(genesis=g.value, default=d.value,
                                              effective=resolve_class(None, g, policy.overrides).value,
                                              set_on="trigger" if g in TRIGGER_KINDS else "policy")
                             for g, d in DEFAULT_GENESIS_CLASS.items()],
            triggers=shown, triggers_next_offset=next_offset(0, len(shown), total),
            accounts=[_account_view(a) for a in account_states(await quota.pool_accounts(conn), parts.readings, now)],
            reading_stale_after_minutes=STALE_AFTER.total_seconds() / 60)

    async def set(self, req: SetPolicy) -> PolicyView:
        if all(v is None for v in req.model_dump().values()):
            raise ZimmerError(ErrorCode.INVALID, "nothing to change: give gating_enabled, a reserve percent or "
                              "max_sessions", {"field": "gating_enabled"})
        async with self.units.begin() as uow:
            conn = uow.conn
            row = await quota.policy(conn)
            p = row.policy
            reserve = dict(p.reserve)
            if req.reserve_five_hour_percent is not None:
                reserve[Window.FIVE_HOUR] = req.reserve_five_hour_percent / 100
            if req.reserve_seven_day_percent is not None:
                reserve[Window.SEVEN_DAY] = req.reserve_seven_day_percent / 100
            p = replace(p, reserve=reserve,
                        gating_enabled=p.gating_enabled if req.gating_enabled is None else req.gating_enabled,
                        max_sessions=p.max_sessions if req.max_sessions is None else req.max_sessions)
            await quota.save_policy(conn, p, row.overrides)
            return await self._view(conn)

    async def genesis_action(self, req: GenesisAction) -> PolicyView:
        async with self.units.begin() as uow:
            conn = uow.conn
            row = await quota.policy(conn)
            if req.action == "reset_genesis_classes":
                overrides: dict[Genesis, SchedulingClass] = {}
            else:
                if req.genesis is None:
                    raise ZimmerError(ErrorCode.INVALID, f"{req.action} needs a genesis", {"field": "genesis"})
                cls = SchedulingClass.PRIORITY if req.action == "promote_genesis" else SchedulingClass.SPOT
                try:
                    overrides = set_genesis_override(row.overrides, Genesis(req.genesis), cls)
                except ClassRuleError as exc:
                    raise ZimmerError(ErrorCode.INVALID, str(exc), {"field": "genesis"}) from None
            await quota.save_policy(conn, row.policy, overrides)
            return await self._view(conn)

    # ---- triggers -----------------------------------------------------------------------

    async def create_trigger(self, req: CreateTrigger) -> TriggerView:
        """With an idempotency key, a retry gets the trigger the first request created."""
        key = idempotency.ref_for("create_trigger", req)
        async with self.units.begin() as uow:
            if key is not None:
                claimed = await uow.claim(key)
                if not claimed.fresh and claimed.response is not None:
                    return idempotency.replay(claimed.response, TriggerView)
            view = await triggers.create(uow.conn, req)
            if key is not None:
                await uow.record(key, view)
            return view

    async def update_trigger(self, req: UpdateTrigger) -> TriggerView:
        """Changing a trigger's class moves nothing it already spawned: its selector is read once, at fire."""
        fields: dict[str, Any] = {k: v for k, v in (("name", req.name), ("prompt", req.prompt),
                                                    ("enabled", req.enabled), ("precedence", req.precedence))
                                  if v is not None}
        if req.scheduling_class is not None:
            fields["scheduling_class"] = None if req.scheduling_class == "derive" else req.scheduling_class
        if req.clear_precedence:
            fields["precedence"] = None
        if not fields:
            raise ZimmerError(ErrorCode.INVALID, "nothing to change", {"field": "scheduling_class"})
        async with self.units.begin() as uow:
            await triggers.fetch(uow.conn, req.trigger_id, lock=True)
            return await triggers.update(uow.conn, req.trigger_id, fields)

    async def fire(self, req: FireTrigger) -> SpawnResult:
        """The trigger fired: genesis is its kind; its class and precedence are stamped once."""
        return await self._spawn_from(req, by_hand=False)

    async def invoke(self, req: FireTrigger) -> SpawnResult:
        """Fired by hand: genesis `api` over the API, `web_ui` from the web app's Invoke button."""
        return await self._spawn_from(req, by_hand=True)

    async def _spawn_from(self, req: FireTrigger, *, by_hand: bool) -> SpawnResult:
        async with self.units.read() as conn:
            t = await triggers.fetch(conn, req.trigger_id)
        if not t.enabled:
            raise ZimmerError(ErrorCode.REFUSED, f"trigger {t.id} is disabled", {"trigger_id": t.id})
        spawn = SpawnSession(idempotency_key=req.idempotency_key, title=req.title or t.name,
                             prompt=req.prompt if req.prompt is not None else t.prompt, metadata=req.metadata)
        return await self.admissions.spawn_session(SpawnRequest(
            spawn, default_genesis=Genesis(req.invoked_from) if by_hand else Genesis(t.kind), trigger_id=t.id,
            trigger_class=SchedulingClass(t.scheduling_class) if t.scheduling_class else None,
            trigger_precedence=t.precedence))

    async def search_triggers(self, q: TriggerQuery, budget: int = ANSWER_ROWS_MAX_BYTES) -> TriggerList:
        """A page of triggers: `q.limit` at most, fewer when their prompts reach `budget` bytes."""
        async with self.units.read() as conn:
            found, total = await triggers.search(conn, q, budget)
        return TriggerList(triggers=found, next_offset=next_offset(q.offset, len(found), total))

    # ---- costs --------------------------------------------------------------------------

    async def costs(self, _q: CostsQuery | None = None) -> CostsView:
        """Burn rates at list prices and in the gate's currency, spend split by the account it draws
        on (Claude or Codex), and how each model seen is priced."""
        now = self.now()
        book = self.prices
        async with self.units.snapshot() as conn:  # the totals, the split and the models seen agree
            rates = await quota.all_burn_rates(conn)
            five = await quota.spend_by_model_since(conn, now - WINDOW_SPAN[Window.FIVE_HOUR])
            seven = await quota.spend_by_model_since(conn, now - WINDOW_SPAN[Window.SEVEN_DAY])

        def split(spend: list[tuple[str, str, float]]) -> tuple[float, float]:
            claude = sum(d for h, m, d in spend if spends_against_claude(h, m))
            return claude, sum(d for _h, _m, d in spend) - claude

        (five_claude, five_codex), (seven_claude, seven_codex) = split(five), split(seven)
        seen = sorted({r.model for r in rates} | {m for _h, m, _d in seven})
        matches = [book.resolve(m) for m in seen]
        return CostsView(
            burn_rates=[BurnRateView(harness=r.harness, model=r.model, dollars_per_minute=r.dollars_per_minute,
                                     opus_dollars_per_minute=r.opus_dollars_per_minute,
                                     spends_against="claude" if spends_against_claude(r.harness, r.model) else "codex",
                                     sessions_counted=r.sessions_counted, computed_at=r.computed_at) for r in rates],
            spend_five_hour_dollars=five_claude + five_codex, spend_seven_day_dollars=seven_claude + seven_codex,
            spend_five_hour_claude_dollars=five_claude, spend_five_hour_codex_dollars=five_codex,
            spend_seven_day_claude_dollars=seven_claude, spend_seven_day_codex_dollars=seven_codex,
            prices_per_million_tokens={m: asdict(p) for m, p in book.table.items()},
            models=[ModelPricing(model=m.model, priced_as=m.priced_as, how=m.how, note=m.note) for m in matches],
            currency=CURRENCY)
