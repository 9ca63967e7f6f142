"""The operator's browser session: a signed, timestamped, HttpOnly, SameSite=Strict cookie, and
the CSRF token every state-changing form carries.

Only the operator token opens a session (the fleet key never opens a page). The cookie is signed
with a key derived from the operator token, so rotating the token signs every browser out. The
CSRF token lives inside the signed cookie and in each form; a POST whose form token does not
match the cookie's is refused before anything runs. Sign-in has no session yet, so its form is
protected by a double-submit token: a short-lived signed cookie that the form must echo.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.requests import Request
from starlette.responses import Response

from zimmer_common.settings import Settings

SESSION_COOKIE = "zimmer_session"
SIGNIN_COOKIE = "zimmer_signin"
SESSION_SECONDS = 12 * 3600  # a working day; then sign in again
SIGNIN_SECONDS = 15 * 60  # the sign-in form's token


@dataclass(frozen=True)
class OperatorSession:
    csrf: str


def _serializer(settings: Settings, salt: str) -> URLSafeTimedSerializer | None:
    token = settings.operator_token.get_secret_value()
    if not token:
        return None  # no operator token configured: no one can sign in
    key = hmac.new(token.encode(), b"zimmer web session v1", hashlib.sha256).hexdigest()
    return URLSafeTimedSerializer(key, salt=salt)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def read_session(request: Request, settings: Settings) -> OperatorSession | None:
    serializer = _serializer(settings, "session")
    raw = request.cookies.get(SESSION_COOKIE)
    if serializer is None or not raw:
        return None
    try:
        data: Any = serializer.loads(raw, max_age=SESSION_SECONDS)
    except BadSignature:  # includes SignatureExpired
        return None
    if not isinstance(data, dict) or data.get("realm") != "operator" or not isinstance(data.get("csrf"), str):
        return None
    return OperatorSession(csrf=data["csrf"])


def open_session(response: Response, request: Request, settings: Settings) -> None:
    serializer = _serializer(settings, "session")
    assert serializer is not None
    value = serializer.dumps({"realm": "operator", "csrf": new_token()})
    response.set_cookie(SESSION_COOKIE, value, max_age=SESSION_SECONDS, httponly=True, samesite="strict",
                        secure=_secure(request), path="/")
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")


def close_session(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/")


def csrf_matches(session: OperatorSession, submitted: str | None) -> bool:
    return bool(submitted) and hmac.compare_digest(session.csrf.encode(), (submitted or "").encode())


def new_token() -> str:
    return secrets.token_urlsafe(24)


def remember_signin_token(response: Response, request: Request, settings: Settings, token: str) -> None:
    """Set the sign-in form's double-submit token as a short-lived signed cookie."""
    serializer = _serializer(settings, "signin")
    if serializer is not None:
        response.set_cookie(SIGNIN_COOKIE, serializer.dumps(token), max_age=SIGNIN_SECONDS, httponly=True,
                            samesite="strict", secure=_secure(request), path="/signin")


def signin_token_matches(request: Request, settings: Settings, submitted: str | None) -> bool:
    serializer = _serializer(settings, "signin")
    raw = request.cookies.get(SIGNIN_COOKIE)
    if serializer is None or not raw or not submitted:
        return False
    try:
        expected = serializer.loads(raw, max_age=SIGNIN_SECONDS)
    except BadSignature:
        return False
    return isinstance(expected, str) and hmac.compare_digest(expected.encode(), submitted.encode())


class SignInThrottle:
    """Failed sign-ins per client address: past `limit` failures within `window` seconds the form
    answers 429 without looking at the token, so the operator token cannot be guessed at speed.
    Kept in memory per gateway process and bounded (the oldest addresses are forgotten first)."""

    def __init__(self, limit: int = 10, window: float = 60.0, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self.max_clients, self.clock = limit, window, max_clients, clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def _recent(self, client: str) -> deque[float]:
        failures = self._failures.get(client, deque())
        cutoff = self.clock() - self.window
        while failures and failures[0] <= cutoff:
            failures.popleft()
        return failures

    def retry_after(self, client: str) -> float | None:
        """Seconds until this client may try again, or None when it may now."""
        failures = self._recent(client)
        if len(failures) < self.limit:
            return None
        return max(1.0, failures[0] + self.window - self.clock())

    def failed(self, client: str) -> None:
        failures = self._recent(client)
        failures.append(self.clock())
        self._failures[client] = failures
        self._failures.move_to_end(client)
        while len(self._failures) > self.max_clients:
            self._failures.popitem(last=False)

    def succeeded(self, client: str) -> None:
        self._failures.pop(client, None)
