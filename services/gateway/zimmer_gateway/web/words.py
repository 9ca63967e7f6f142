"""How every operator page says a number, a schedule, a wait or a refusal (issue 32 #6): pure
functions, no I/O, used by every page that shows one, so a duration reads "2 h 18 min" wherever it
appears and a waiting row names why it waits wherever its status is shown.

- `duration`: a span in words ("45 s", "12 min", "2 h 18 min", "3 d 4 h"), never "4365 min".
- `cron_words`: a job's cadence in words (cron-descriptor, seconds first as the jobs' schedules are
  written), "UTC" named where it fixes an hour of the day; an expression croniter (the schedulers'
  own reader) does not take is shown as it is.
- `wait_pill`: why a session that is not running waits: paused until a time, paused mid-run by the
  quota ceiling, parked in the spot queue, held at the gate and for which reason.
- `name_rows`: a service's refusal with the backlog's internal row ids ("item 47") replaced by the
  keys the page shows ("zimmer#3").
- `field_words`: a contract's validation error in an operator's words, for the field it names.
- `origin`: the page a form or an address belongs to, where "Back" goes.
- `address_words`: why an address (a path or query parameter) is not a page here.
- `time_element`, `with_times`: a moment (or each moment in a service's sentence) as a `<time>`
  element in UTC, which clock.js shows in the reader's zone: one time zone per screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cron_descriptor import ExpressionDescriptor, FormatError, MissingFieldError, Options, WrongArgumentError
from croniter import croniter
from markupsafe import Markup, escape


def duration(seconds: float | None) -> str:
    """A span as a person reads it: "45 s", "12 min", "2 h 18 min", "3 d 4 h"; each unit below the
    largest is cut, never rounded up, so a span is never said as longer than it is. None: "—"."""
    if seconds is None:
        return "—"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    minutes = s // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


_CRON_OPTIONS = Options()
_CRON_OPTIONS.use_24hour_time_format = True
_CRON_OPTIONS.verbose = False


def cron_words(expression: str) -> str:
    """A cadence in words: "Every 10 minutes", "At 30 minutes past the hour, every 6 hours",
    "At 08:00 UTC". Schedules here are written with seconds first (six fields); a five-field one
    is read as minute-first. A schedule naming an hour of the day runs in UTC and says so. An
    expression that is not a schedule cron-descriptor reads comes back as it is."""
    fields = expression.split()
    if len(fields) not in (5, 6) or not croniter.is_valid(expression, second_at_beginning=len(fields) == 6):
        return expression  # cron-descriptor describes "0 0 99 * * *" as "At 99:00": croniter judges it
    try:
        words = ExpressionDescriptor(expression, _CRON_OPTIONS).get_description()
    except (FormatError, MissingFieldError, WrongArgumentError, ValueError, IndexError, KeyError):
        return expression
    hour = fields[-4]
    if not (hour == "*" or hour.startswith("*/")):  # a fixed hour of the day: the scheduler's clock is UTC
        words += " UTC"
    return words


@dataclass(frozen=True)
class WaitPill:
    """Why a session waits, for the pill beside its status: `kind` for the markup (held, parked,
    paused, paused_until), `words` for the pill, `detail` for its title, `until` when it names a
    moment (the template renders it as a time)."""

    kind: str
    words: str
    detail: str
    until: datetime | None = None


HOLD_WORDS = {
    "at_utilization_limit": "quota headroom",
    "fleet_at_cap": "every session slot taken",
}
PAUSE_WORDS = {
    "at_utilization_limit": ("paused", "paused mid-run for quota headroom",
                             "the quota ceiling stopped its turn; it resumes when a window has room again"),
    "user_spot_queue": ("parked", "parked in the spot queue",
                        "a person parked it in the spot queue; it resumes in queue order"),
    "auth_outage": ("parked", "parked: account needs sign-in",
                    "its account's credentials were out; it resumes once the account reads active again"),
}


def wait_pill(session: Any) -> WaitPill | None:
    """Why `session` (a SessionView, or anything with its fields) waits, or None when nothing holds
    it back. The first that applies: a wall-clock pause ahead (nothing starts it before then), a
    pause by the ceiling or a park, a hold at the gate."""
    if getattr(session, "status", None) == "archived":
        return None
    until = getattr(session, "paused_until", None)
    if until is not None:
        return WaitPill("paused_until", "paused until", "nothing starts it before then, whatever its precedence",
                        until)
    if getattr(session, "paused_by", None):
        reason = getattr(session, "spot_pause_reason", None) or "at_utilization_limit"
        kind, words, detail = PAUSE_WORDS.get(reason, ("paused", f"paused: {reason}", reason))
        sentence = getattr(session, "pause_sentence", None)
        return WaitPill(kind, words, sentence or detail)
    reason = getattr(session, "spot_hold_reason", None)
    if reason:
        what = "next turn held" if getattr(session, "ever_started", False) else "held"
        words = f"{what}: {HOLD_WORDS.get(reason, reason.replace('_', ' '))}"
        return WaitPill("held", words, f"held at the spot gate ({reason}); it is re-checked on a backed-off timer")
    return None


_ROW = re.compile(r"\b(?:[Ww]ork backlog )?[Ii]tem (\d+)\b")


def name_rows(message: str, names: dict[int, str]) -> str:
    """`message` with each backlog row named as the page names it: "item 47" (or "work backlog
    item 47") becomes "zimmer#3"; a row the page does not show becomes "another row"."""
    return _ROW.sub(lambda m: names.get(int(m.group(1)), "another row"), message)


def field_words(error: dict[str, Any], label: str) -> str:
    """One pydantic error (`ValidationError.errors()[n]`) in words, for the field called `label`:
    the limit it broke, not the validator's phrasing."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    given = error.get("input")
    if kind in ("missing", "string_too_short") and not given:
        return f"{label} is required."
    if kind == "string_too_long":
        return (f"{label} is too long: at most {ctx.get('max_length', '?'):,} characters"
                + (f" (this is {len(given):,})." if isinstance(given, str) else "."))
    if kind == "string_too_short":
        return f"{label} is too short: at least {ctx.get('min_length', '?'):,} characters."
    if kind in ("less_than_equal", "less_than"):
        return f"{label} must be at most {_number(ctx.get('le', ctx.get('lt')))}."
    if kind in ("greater_than_equal", "greater_than"):
        return f"{label} must be at least {_number(ctx.get('ge', ctx.get('gt')))}."
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{label} must be a whole number."
    if kind in ("float_parsing", "float_type", "finite_number"):
        return f"{label} must be a number."
    if kind in ("literal_error", "enum"):
        return f"{label} must be one of {ctx.get('expected', 'the choices offered')}."
    message = str(error.get("msg", "is not valid"))
    return f"{label}: {message.removeprefix('Value error, ')}"


def _number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


# The pages' own paths: a form posts to `<page>/<id>/<action>` or `<page>/<action>`.
_PAGES = ("/issues", "/ranked", "/quotas", "/costs", "/health", "/sessions", "/triggers")


def origin(path: str) -> str:
    """The page `path` (a form's action, or an address) belongs to: `/issues/47/pin` → `/issues`,
    `/sessions/5/precedence` → `/sessions/5`, `/sessions/abc` → `/sessions`, `/health/queued/discard`
    → `/health`; anything else → `/`."""
    for page in _PAGES:
        if path == page or path.startswith(page + "/"):
            if page == "/sessions":
                parts = path.split("/")
                return f"/sessions/{parts[2]}" if len(parts) > 2 and parts[2].isdigit() else page
            return page
    return "/"


NOUNS = {"session_id": "session", "item_id": "backlog item", "trigger_id": "trigger"}


def address_words(error: dict[str, Any]) -> str:
    """Why an address is not a page here, from the first error FastAPI found in it: a path part
    that names nothing ("There is no session “abc”"), or a query parameter the page does not take."""
    loc = [str(x) for x in error.get("loc", ())]
    where, name = (loc[0], loc[-1]) if loc else ("query", "?")
    given = error.get("input")
    shown = "" if given is None else f"“{str(given)[:80]}”"
    if where == "path":
        noun = NOUNS.get(name, name.replace("_", " "))
        return f"There is no {noun} {shown}: a {noun} is named by its number, as the pages link to it."
    if str(error.get("type")) in ("literal_error", "enum"):
        return f"{shown} is not one of this page's choices for {name}: {error.get('ctx', {}).get('expected', '')}."
    return f"{name} {shown} is not something this page takes: {field_words(error, name)}"


_INSTANT = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|\s?UTC)")


def utc_text(at: datetime) -> str:
    """A moment as the markup says it before the browser rewrites it to local time."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def time_element(at: datetime) -> Markup:
    """One way to show a moment: `<time>` with the UTC instant in `datetime`, the UTC text shown
    (labelled, for a reader without JavaScript) and on hover; clock.js rewrites the text to the
    reader's zone."""
    text = utc_text(at)
    return Markup('<time datetime="{}" title="{}" data-local>{}</time>').format(
        at.astimezone(UTC).isoformat().replace("+00:00", "Z"), text, text)


def with_times(text: str | None) -> Markup:
    """A service's sentence, escaped, with every instant in it (ISO 8601, or "… UTC") shown as a
    `time_element`, so a sentence and the page around it read in one time zone."""
    if not text:
        return Markup("")
    out, at = [], 0
    for m in _INSTANT.finditer(text):
        raw = m.group(0).replace(" UTC", "Z").replace("UTC", "Z")
        try:
            moment = datetime.fromisoformat(raw.replace(" ", "T").replace("Z", "+00:00"))
        except ValueError:
            continue
        if moment.tzinfo is None:
            continue
        out += [escape(text[at:m.start()]), time_element(moment)]
        at = m.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


_REFERENCE = re.compile(
    r"(?P<url>https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+)"
    r"|(?<![\w/#])(?:(?P<owner>[\w.-]+)/)?(?P<name>[\w.-]+)?#(?P<number>\d+)\b")


def repository_of(url: str | None) -> str | None:
    """`owner/name` of a GitHub issue or pull request URL, else None."""
    m = re.match(r"https://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/\d+", url or "")
    return m.group(1) if m else None


def issue_links(text: str | None, repositories: dict[str, str], here: str | None = None) -> Markup:
    """Free text (a title, a hold's reason), escaped, with each issue or PR it names linked to
    GitHub: a URL; `owner/name#12`; `name#12` when `name` is a repository the page knows
    (`repositories`: short name → owner/name); a bare `#12` in `here`, the row's own repository.
    GitHub sends an issue number that is a pull request to the pull request."""
    if not text:
        return Markup("")
    out, at = [], 0
    for m in _REFERENCE.finditer(text):
        if m.group("url"):
            href = m.group("url")
        else:
            owner, name, number = m.group("owner"), m.group("name"), m.group("number")
            full = f"{owner}/{name}" if owner and name else repositories.get((name or "").lower()) if name else here
            if full is None:
                continue
            href = f"https://github.com/{full}/issues/{number}"
        out += [escape(text[at:m.start()]),
                Markup('<a href="{}" rel="noreferrer">{}</a>').format(href, m.group(0))]
        at = m.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)
