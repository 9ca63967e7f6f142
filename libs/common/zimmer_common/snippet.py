"""The log snippet (seed 003, "The log snippet"): raw runtime text or an exception, made safe to
put in a page's own context field (never the prose). Pure, and it never raises. Plumbing: the
pager (`zimmer_common.pager`) builds it in the sending process, before anything leaves it.

- Keeps the frames worth reading: the first 8 app-owned frames and the top 2 (innermost, where
  the raise happened, usually library code); every skipped run is marked "(… N frames elided …)"
  so nothing looks complete when it is not. An app frame is one in a `zimmer_*` package, by its
  module path, wherever it is installed; its path is shown from the package on.
- Follows the cause chain, up to 2 causes.
- Redacts every secret shape the seed lists before anything leaves the process.
- Bounds the result at 1,200 characters, keeping head and tail with the elided count between
  (the end of a log is often where the failure is).
- Scrubs input to valid UTF-8 (stderr can end mid-character), and degrades a render that fails
  anyway to "(log snippet unavailable: <class>)".
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

APP_FRAME_LIMIT = 8
TOP_FRAME_LIMIT = 2
CAUSE_LIMIT = 2
MAX_CHARS = 1200
REDACTED = "[REDACTED]"
ROOT = str(Path(__file__).resolve().parents[3])  # the repository root in a checkout, stripped from paths
# An app-owned frame is one in a Zimmer package, decided by the module's own path segment, not by
# where it is installed: under `pip install .` every Zimmer frame sits in site-packages too.
APP_PACKAGE = re.compile(r"(?:^|/)(zimmer_[a-z_]+)/")

# (name, pattern, replacement): each secret shape the seed lists. A shape is matched only as a
# whole token (no word character glued on before it), so an ordinary word that merely contains
# "sk" or "token" is left alone.
SECRET_SHAPES: Sequence[tuple[str, re.Pattern[str], str | Callable[[re.Match[str]], str]]] = (
    ("pem_private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)", re.S),
     REDACTED),
    ("authorization_header", re.compile(
        r"(?i)\b(authorization[\"']?\s*[:=]\s*([\"']?)(?:(?:bearer|basic|token)\s+)?)"
        r"(?!\[REDACTED\])[^\s\"',;}]+"), rf"\g<1>{REDACTED}"),
    ("url_password", re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@"), rf"\g<1>{REDACTED}@"),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
    ("slack_app_token", re.compile(r"(?<![A-Za-z0-9])xapp-[A-Za-z0-9-]{10,}"), REDACTED),
    ("github_token", re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
     REDACTED),
    ("anthropic_key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{20,}"), REDACTED),
    ("openai_key", re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-)?[A-Za-z0-9_-]{20,}"), REDACTED),
    ("google_key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"), REDACTED),
    ("aws_key_id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"), REDACTED),
    # A key naming a secret, bare or quoted (`token=…`, `"password": "…"`, `{'client_secret': …}`),
    # then its value, bare or quoted, after a scheme word if there is one (`access_token: Bearer …`:
    # the scheme is kept, the credential goes).
    ("secret_assignment", re.compile(
        r"(?i)(?<![A-Za-z0-9])([\"']?[A-Za-z0-9_.-]*(?:token|secret|password|passwd|api_?key)[A-Za-z0-9_.-]*[\"']?"
        r"\s*[=:]\s*(?:(?:bearer|basic|token)\s+)?)(?!\[REDACTED\]|[\"']\[REDACTED\])"
        r"(\"[^\"]*\"|'[^']*'|[^\s&\"',;}]+)"), lambda m: m.group(1) + _redacted_value(m.group(2))),
)


def _redacted_value(value: str) -> str:
    """A quoted value keeps its quotes, so a JSON or dict shape still reads as one."""
    return f"{value[0]}{REDACTED}{value[0]}" if value[:1] in ("'", '"') else REDACTED


def in_zimmer_package(filename: str) -> bool:
    return APP_PACKAGE.search(filename.replace("\\", "/")) is not None


def build(source: object, *, root: str = ROOT, app: Callable[[str], bool] = in_zimmer_package) -> str:
    """The snippet for `source`: an exception (its frames and cause chain), bytes or text. `app`
    says which frames are the application's (a Zimmer package's, by default)."""
    try:
        if isinstance(source, BaseException):
            text = _exception_text(source, root, app)
        elif isinstance(source, bytes | bytearray):
            text = bytes(source).decode("utf-8", errors="replace")
        else:
            text = str(source)
        return bound(redact(scrub(text)))
    except Exception as exc:  # noqa: BLE001 - a snippet must never be the thing that fails
        return f"(log snippet unavailable: {type(exc).__name__})"


def scrub(text: str) -> str:
    """Valid UTF-8 whatever came in: lone surrogates become U+FFFD; NUL (which no JSON column
    stores) becomes the visible ␀."""
    return text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace").replace("\x00", "␀")


def redact(text: str) -> str:
    for _name, pattern, replacement in SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def bound(text: str, limit: int = MAX_CHARS) -> str:
    """At most `limit` characters: head and tail kept, the elided count between them."""
    if len(text) <= limit:
        return text
    marker = "\n(… {} characters elided …)\n"
    room = limit - len(marker.format(len(text)))
    head, tail = room - room // 2, room // 2
    return text[:head] + marker.format(len(text) - head - tail) + (text[-tail:] if tail else "")


def _exception_text(exc: BaseException, root: str, app: Callable[[str], bool]) -> str:
    """The exception, then up to CAUSE_LIMIT causes, each with its frames worth reading."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    label = ""
    for _ in range(CAUSE_LIMIT + 1):
        if current is None or id(current) in seen:
            return "\n".join(parts)
        seen.add(id(current))
        if label:
            parts.append(label)
        parts.append(f"{type(current).__name__}: {_message(current)}")
        parts.extend(frames(traceback.extract_tb(current.__traceback__), root, app))
        label = "caused by:" if current.__cause__ is not None else "while handling:"
        current = exc_cause(current)
    if current is not None and id(current) not in seen:
        parts.append("(… further causes elided …)")
    return "\n".join(parts)


def exc_cause(exc: BaseException) -> BaseException | None:
    """What this exception was raised from (`raise … from`), else what it interrupted."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def _message(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception as inner:  # noqa: BLE001 - a broken __str__ still gets a snippet
        return f"(message unavailable: {type(inner).__name__})"


def frames(stack: Sequence[traceback.FrameSummary], root: str,
           app: Callable[[str], bool] = in_zimmer_package) -> list[str]:
    """The frames worth reading, innermost first: the top 2 and the first 8 app-owned ones, each
    skipped run marked with its length."""
    innermost_first = list(reversed(stack))
    keep: set[int] = set(range(min(TOP_FRAME_LIMIT, len(innermost_first))))
    owned = [i for i, f in enumerate(innermost_first) if app(f.filename)]
    keep.update(owned[:APP_FRAME_LIMIT])
    lines: list[str] = []
    skipped = 0
    for i, frame in enumerate(innermost_first):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            lines.append(f"  (… {skipped} frame{'s' if skipped != 1 else ''} elided …)")
            skipped = 0
        lines.append(f"  {_path(frame.filename, root)}:{frame.lineno} in {frame.name}")
    if skipped:
        lines.append(f"  (… {skipped} frame{'s' if skipped != 1 else ''} elided …)")
    return lines


def _path(filename: str, root: str) -> str:
    """The path from the Zimmer package on (`zimmer_common/pager.py`), wherever it is installed; a
    library's path with the repository root stripped."""
    found = APP_PACKAGE.search(filename.replace("\\", "/"))
    if found:
        return filename.replace("\\", "/")[found.start(1):]
    return filename[len(root):].lstrip("/") if root and filename.startswith(root) else filename
