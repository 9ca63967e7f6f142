"""Starting work from the pages (seed 004, issue 32 #2): the new-session form on /sessions and the
Quick Router's prompt on Ranked, read into the `spawn_session` request REST's POST
/api/v1/sessions makes, as the operator.

Both declare genesis `web_ui` ("a human typed it into the Zimmer web app"). The new-session form
names a Scheduling class (or none: the session derives its class from web_ui, so /quotas still
moves it) and a precedence. The Quick Router's "Run as spot" box, unticked, sends no class at all;
ticked, it makes the session spot and lands it a few points above the highest spot session queued
(`precedence_above_top_spot`: a human typed it seconds ago). Each form carries a key made when the
page was drawn; joined with a digest of what was asked it is the spawn's idempotency key, so a form
posted twice (a double click, a reload of the POST) starts one session.
"""

from __future__ import annotations

import hashlib

from starlette.datastructures import FormData

from zimmer_common.contracts import spot as c
from zimmer_common.contracts.fields import TITLE_MAX
from zimmer_common.errors import ErrorCode, ZimmerError
from zimmer_gateway.web.pages import whole_number
from zimmer_gateway.web.session import new_token

CLASSES = ("derive", "priority", "spot")
LABELS = {"prompt": "Prompt", "title": "Title", "scheduling_class": "Scheduling class", "precedence": "Precedence",
          "idempotency_key": "The form's key", "parent_session_id": "Parent session"}


def form_key() -> str:
    """The idempotency key a freshly drawn form carries (a refused form keeps the one it was posted with)."""
    return f"web-{new_token()}"


def _prompt(form: FormData) -> str:
    prompt = str(form.get("prompt") or "").replace("\r\n", "\n")  # a textarea posts its lines CRLF
    if not prompt.strip():
        raise ZimmerError(ErrorCode.INVALID, "Prompt is required: it is what the session is asked to do.",
                          {"field": "prompt"})
    return prompt


def _title(form: FormData, prompt: str) -> str:
    """The title typed, else the prompt's first line, cut to a title's length."""
    typed = str(form.get("title") or "").strip()
    if typed:
        return typed  # the contract says when it is too long
    first = prompt.strip().splitlines()[0].strip()
    return first if len(first) <= TITLE_MAX else first[: TITLE_MAX - 1] + "…"


def _key(form: FormData) -> str | None:
    """The drawn form's key joined with a digest of what was asked: the same form posted twice
    starts one session, while two different prompts never share a session, even from forms that
    carry one key (two tabs given one live render, say)."""
    drawn = str(form.get("idempotency_key") or "").strip()
    if not drawn:
        return None
    asked = "\x00".join(str(form.get(name) or "") for name in ("prompt", "title", "scheduling_class", "precedence",
                                                                 "run_as_spot", "parent"))
    return f"{drawn[:120]}-{hashlib.sha256(asked.encode()).hexdigest()[:24]}"


def new_session(form: FormData) -> c.SpawnSession:
    """The new-session form: prompt, title, Scheduling class (derive = none stored), precedence
    (empty = none named: 0, or above the top of the spot queue for spot)."""
    prompt = _prompt(form)
    chosen = str(form.get("scheduling_class") or "derive")
    if chosen not in CLASSES:
        raise ZimmerError(ErrorCode.INVALID, "Scheduling class must be derive, priority or spot.",
                          {"field": "scheduling_class"})
    return c.SpawnSession(genesis="web_ui", scheduling_class=None if chosen == "derive" else chosen,
                          precedence=whole_number(form, "precedence"), title=_title(form, prompt), prompt=prompt,
                          idempotency_key=_key(form))


def quick_router(form: FormData) -> c.SpawnSession:
    """The Quick Router: a prompt, and Run as spot (unticked: no class sent, the session derives
    from web_ui; ticked: spot, a few points above the top of the spot queue). The chat bubble on a
    session's page names that session as `parent`: the conversation threads under it, and the
    declared web_ui outranks the parent's genesis and class (an unticked child lands just above
    its parent)."""
    prompt = _prompt(form)
    spot = form.get("run_as_spot") == "yes"
    return c.SpawnSession(genesis="web_ui", scheduling_class="spot" if spot else None,
                          precedence_above_top_spot=spot, title=_title(form, prompt), prompt=prompt,
                          parent_session_id=whole_number(form, "parent"), idempotency_key=_key(form))
