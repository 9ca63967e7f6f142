"""The Quotas page (seed 004: "Pooled utilization", "When the pool comes back", "Targets and the
concurrency limit", the MCP parity table's Web UI column): the Account Pool with the unblock
banner, each window in dollars or "not calibrated", the spot gate card, the settings form and the
genesis classes. Everything comes from one `get_spot_policy` answer, the same one REST and MCP
give, so the page and the gate cannot disagree; the forms make `set_spot_policy` and
`genesis_action`, as REST does, and "Preview these settings against the last 7 days" asks the
policy dry-run (`quotas_preview`) and shows the page again with its answer."""

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
from zimmer_gateway.web import quota_words, quotas_preview
from zimmer_gateway.web.charts import quota_charts
from zimmer_gateway.web.pages import (
    FormRefusal,
    Refused,
    back_to,
    bus_of,
    decimal_number,
    form_refusal,
    perform,
    refusal,
    render,
    signed_in,
    whole_number,
)
from zimmer_gateway.web.quota_words import WINDOW_NAMES, money, rate

__all__ = ["WINDOW_NAMES", "countdown", "create_quotas", "money", "rate", "weekly_note"]

DONE = {"settings": "Saved the settings.", "promote_genesis": "Promoted {genesis} to priority.",
        "demote_genesis": "Demoted {genesis} to spot.", "reset_genesis_classes": "Reset every genesis to its default."}


def countdown(at: datetime, now: datetime) -> str:
    """The clock string the browser would show now: the first paint is already right."""
    s = max(0, int((at - now).total_seconds()))
    h, rem = divmod(s, 3600)
    days, h = divmod(h, 24)
    return (f"{days}d {h:02d}" if days else f"{h:02d}") + f":{rem // 60:02d}:{rem % 60:02d}"


def weekly_note(unblock: p.UnblockView) -> str | None:
    """The Next 7-day reset note when it names no moment (the template renders the moment as a
    local time): no account's week is spent, or none of the spent ones recorded its reset."""
    if not unblock.accounts_week_spent:
        return "No account's week is spent, so no 7-day rollover is holding anything."
    if unblock.next_weekly_reset_at is None:
        n = unblock.accounts_week_spent
        return f"{n} account{'s' if n != 1 else ''} with the week spent; none recorded when its week resets."
    return None


# The settings form's fields as its labels name them: a refusal names the field the operator sees.
SETTING_LABELS = {"reserve_five_hour_percent": "Priority reserve, 5-hour window (%)",
                  "reserve_seven_day_percent": "Priority reserve, 7-day window (%)",
                  "max_sessions": "Max sessions at once"}


def create_quotas(service: Service) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def page(request: Request, done: str | None = None, genesis: str | None = None,
                   preview: quotas_preview.Preview | None = None, refused: FormRefusal | None = None,
                   status_code: int = 200) -> Response:
        session = signed_in(request)
        try:
            policy = await bus_of(service).request(p.GET_POLICY, p.PolicyQuery())
        except ZimmerError as exc:
            return refusal(request, exc)
        now = datetime.now(UTC)
        windows = {w.window: w for w in policy.windows}
        notice = DONE[done].format(genesis=genesis or "the genesis") if done in DONE else None
        charts = await quota_charts(service)
        return render(request, "quotas.html", status_code=preview.status if preview else status_code, title="Quotas",
                      refused=refused, csrf=session.csrf, policy=policy, windows=windows,
                      names=WINDOW_NAMES, now=now, notice=notice, money=money, rate=rate, quota_words=quota_words,
                      clock=countdown(policy.unblock.at, now) if policy.unblock.at else None,
                      weekly_note=weekly_note(policy.unblock), **charts,
                      **quotas_preview.page_context(preview, policy, charts))

    @router.get("/quotas")
    async def quotas(request: Request, done: str | None = None, genesis: str | None = None) -> Response:
        return await page(request, done, genesis)

    @router.post("/quotas/preview")
    async def preview(request: Request) -> Response:
        """Preview these settings against the last 7 days: the page again, with the answer (or the
        refusal beside its field); nothing is changed, so no redirect."""
        asked = await quotas_preview.ask(request, service)
        return asked if isinstance(asked, Response) else await page(request, preview=asked)

    async def act(request: Request, done: str, rpc: Any, build: Callable[[FormData], Any],
                  genesis: str = "", form_id: str | None = None) -> Response:
        """The form's RPC, then back to the page; a refusal of the settings form (`form_id`) is the
        page again with what was typed and the words beside the field (issue 32 #6)."""
        try:
            await perform(request, service, rpc, build, labels=SETTING_LABELS)
        except Refused as refused:
            if form_id is None or refused.error.code.value == "forbidden":  # a forged form: nothing to re-render
                return refused.response
            return await page(request, refused=form_refusal(form_id, refused.form, refused.error),
                              status_code=refused.error.http_status)
        return back_to("/quotas", done, **({"genesis": genesis} if genesis else {}))

    @router.post("/quotas/settings")
    async def settings(request: Request) -> Response:
        return await act(request, "settings", p.SET_POLICY, lambda form: p.SetPolicy(
            gating_enabled=form.get("gating_enabled") == "on",
            reserve_five_hour_percent=decimal_number(form, "reserve_five_hour_percent"),
            reserve_seven_day_percent=decimal_number(form, "reserve_seven_day_percent"),
            max_sessions=whole_number(form, "max_sessions")), form_id="settings")

    @router.post("/quotas/genesis")
    async def genesis_action(request: Request) -> Response:
        form = await request.form()
        action, genesis = str(form.get("action") or ""), str(form.get("genesis") or "")
        return await act(request, action if action in DONE else "settings", p.GENESIS_ACTION,
                         lambda f: p.GenesisAction(action=action, genesis=genesis or None),  # type: ignore[arg-type]  # pydantic validates the form's strings into the literals
                         genesis=genesis if genesis.isidentifier() else "")

    return router
