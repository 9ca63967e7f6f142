"""The Quotas page (seed 004: "Pooled utilization", "When the pool comes back", "Targets and the
concurrency limit", the MCP parity table's Web UI column): the Account Pool with the unblock
banner, each window in dollars or "not calibrated", the spot gate card, the settings form and the
genesis classes. Everything comes from one `get_spot_policy` answer, the same one REST and MCP
give, so the page and the gate cannot disagree; the forms make `set_spot_policy` and
`genesis_action`, as REST does."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from starlette.datastructures import FormData
from starlette.responses import Response

from zimmer_common.contracts import spot_policy as p
from zimmer_common.errors import ZimmerError
from zimmer_common.service import Service
from zimmer_gateway.web.pages import Refused, back_to, bus_of, decimal_number, perform, refusal, render, signed_in, whole_number

WINDOW_NAMES = {"five_hour": "5-hour", "seven_day": "7-day"}
DONE = {"settings": "Saved the settings.", "promote_genesis": "Promoted {genesis} to priority.",
        "demote_genesis": "Demoted {genesis} to spot.", "reset_genesis_classes": "Reset every genesis to its default."}


def countdown(at: datetime, now: datetime) -> str:
    """The clock string the browser would show now: the first paint is already right."""
    s = max(0, int((at - now).total_seconds()))
    h, rem = divmod(s, 3600)
    days, h = divmod(h, 24)
    return (f"{days}d {h:02d}" if days else f"{h:02d}") + f":{rem // 60:02d}:{rem % 60:02d}"


def money(window: p.WindowPosture, dollars: float | None) -> str:
    """Dollars once calibrated; never $0.00 for "not calibrated" (seed 004)."""
    return "not calibrated" if not window.calibrated or dollars is None else f"${dollars:,.2f}"


def rate(window: p.WindowPosture, value: float) -> str:
    return f"${value:,.4f}/min" if window.calibrated else f"{value * 100:.4f}% of the window/min"


def weekly_note(unblock: p.UnblockView) -> str | None:
    """The Next 7-day reset note when it names no moment (the template renders the moment as a
    local time): no account's week is spent, or none of the spent ones recorded its reset."""
    if not unblock.accounts_week_spent:
        return "No account's week is spent, so no 7-day rollover is holding anything."
    if unblock.next_weekly_reset_at is None:
        n = unblock.accounts_week_spent
        return f"{n} account{'s' if n != 1 else ''} with the week spent; none recorded when its week resets."
    return None


def create_quotas(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/quotas")
    async def quotas(request: Request, done: str | None = None, genesis: str | None = None) -> Response:
        session = signed_in(request)
        try:
            policy = await bus_of(service).request(p.GET_POLICY, p.PolicyQuery())
        except ZimmerError as exc:
            return refusal(request, exc)
        now = datetime.now(UTC)
        windows = {w.window: w for w in policy.windows}
        notice = DONE[done].format(genesis=genesis or "the genesis") if done in DONE else None
        return render(request, "quotas.html", title="Quotas", csrf=session.csrf, policy=policy, windows=windows,
                      names=WINDOW_NAMES, now=now, notice=notice, money=money, rate=rate,
                      clock=countdown(policy.unblock.at, now) if policy.unblock.at else None,
                      weekly_note=weekly_note(policy.unblock))

    async def act(request: Request, done: str, rpc: Any, build: Callable[[FormData], Any],
                  genesis: str = "") -> Response:
        try:
            await perform(request, service, rpc, build)
        except Refused as refused:
            return refused.response
        return back_to("/quotas", done, **({"genesis": genesis} if genesis else {}))

    @router.post("/quotas/settings")
    async def settings(request: Request) -> Response:
        return await act(request, "settings", p.SET_POLICY, lambda form: p.SetPolicy(
            gating_enabled=form.get("gating_enabled") == "on",
            reserve_five_hour_percent=decimal_number(form, "reserve_five_hour_percent"),
            reserve_seven_day_percent=decimal_number(form, "reserve_seven_day_percent"),
            max_sessions=whole_number(form, "max_sessions")))

    @router.post("/quotas/genesis")
    async def genesis_action(request: Request) -> Response:
        form = await request.form()
        action, genesis = str(form.get("action") or ""), str(form.get("genesis") or "")
        return await act(request, action if action in DONE else "settings", p.GENESIS_ACTION,
                         lambda f: p.GenesisAction(action=action, genesis=genesis or None),  # type: ignore[arg-type]  # pydantic validates the form's strings into the literals
                         genesis=genesis if genesis.isidentifier() else "")

    return router
