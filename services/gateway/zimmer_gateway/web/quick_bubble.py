"""The chat-bubble Quick Router (seed 004 "The Quick Router's spot opt-in", issue 32 #2): a bubble on
every operator page (the mobile joystick's Quick Router petal at phone width) opening a panel with
the prompt and Run as spot, posting to the Quick Router's own route (POST /ranked/quick, web/ranked.py,
read by spawn_forms.quick_router), never a copy of it.

On a session's page the bubble carries that session as parent, so the conversation threads, and
declares genesis web_ui: a person typed it (an unticked child still lands just above its parent).
The form says which page it was opened on (`back`): Submit goes back there with a notice; a
refusal re-renders this module's page, /quick, with the refusal beside the field and what was
typed kept. Without script the bubble is a plain link to /quick (the same form, alone on a page);
with it (static/quick_bubble.js) the panel is a modal dialog drawn from the layout's <template>.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fastapi import APIRouter, Query, Request
from starlette.responses import RedirectResponse, Response

from zimmer_gateway.routes.common import ID_MAX
from zimmer_gateway.web import spawn_forms, words
from zimmer_gateway.web.pages import TEMPLATES, FormRefusal, render, safe_next, signed_in

FORM = "bubble"  # the form's id, as refused_here names it
BACK_MAX = 300  # characters of the page the bubble was opened on: longer is no page of ours


def safe_back(back: str | None) -> str:
    """The page to go back to: a path on this site of at most BACK_MAX characters, else home (a
    posted `back` of 100 KB made a Location header no client follows)."""
    return safe_next(back) if back and len(back) <= BACK_MAX else safe_next(None)
TEMPLATES.env.globals["quick_form_key"] = spawn_forms.form_key  # the layout draws the bubble's form
TEMPLATES.env.globals["page_origin"] = words.origin  # the page a form's refusal was re-rendered for


def routed_notice(session_id: str, spot: bool) -> str:
    """What the page the bubble went back to says (the layout shows it)."""
    return f"Started session {session_id} from the Quick Router" + (
        " as spot, at the top of the spot queue." if spot else ": its first turn went to the gate.")


TEMPLATES.env.globals["quick_routed_notice"] = routed_notice


def routed(back: str, session_id: int, spot: bool) -> Response:
    """After the bubble's Submit: back to the page it was opened on (a GET), naming the session
    started (its id, never free text) for the layout's notice."""
    about = {"quick": str(session_id), **({"quick_class": "spot"} if spot else {})}
    # The page's own query kept, the notice's added to it (a `back` of /ranked?filter=all went to
    # /ranked?filter=all?quick=5, a bad filter); an earlier notice's replaced, not repeated.
    page = urlsplit(safe_back(back))
    query = [(k, v) for k, v in parse_qsl(page.query, keep_blank_values=True) if k not in ("quick", "quick_class")]
    return RedirectResponse(urlunsplit(("", "", page.path, urlencode([*query, *about.items()]), "")), status_code=303)


async def bubble_page(request: Request, parent: int | None, back: str, refused: FormRefusal | None = None,
                      status_code: int = 200) -> Response:
    """The bubble's form alone on a page: where the bubble goes without script, and where a refused
    submission from the panel comes back to (what was typed kept, the refusal beside the field)."""
    operator = signed_in(request)
    return render(request, "quick_bubble.html", status_code=status_code, title="Quick Router", csrf=operator.csrf,
                  parent=parent, back=safe_back(back), refused=refused, no_bubble=True)


def create_quick_bubble() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/quick")
    async def quick(request: Request, parent: Annotated[int | None, Query(ge=1, le=ID_MAX)] = None,
                    back: Annotated[str, Query(max_length=BACK_MAX)] = "/ranked") -> Response:
        return await bubble_page(request, parent, back)

    return router
