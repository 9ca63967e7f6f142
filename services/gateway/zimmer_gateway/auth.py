"""Credentials: the fleet's shared API key and the operator token, both `Authorization: Bearer`.

The fleet key reaches the agent/script API; operator-only routes need the operator token and
answer 403 to the fleet key (DESIGN §6 is stricter than the seed here on purpose). Tokens are
compared in constant time. The dependencies are `async def` although they never wait:
FastAPI runs a plain `def` dependency in a worker thread, a handoff on every request.
"""

from __future__ import annotations

import hmac
from enum import StrEnum

from fastapi import Depends, HTTPException, Request

from zimmer_common.settings import Settings


class Realm(StrEnum):
    FLEET = "fleet"
    OPERATOR = "operator"


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "missing bearer credential", headers={"WWW-Authenticate": 'Bearer realm="zimmer"'})
    return token.strip()


def _matches(token: str, secret: str) -> bool:
    return bool(secret) and hmac.compare_digest(token.encode(), secret.encode())


def realm_of(settings: Settings, token: str) -> Realm | None:
    if _matches(token, settings.operator_token.get_secret_value()):
        return Realm.OPERATOR
    if _matches(token, settings.api_key.get_secret_value()):
        return Realm.FLEET
    return None


async def authenticated(request: Request) -> Realm:
    """Any valid credential: the fleet key or the operator token."""
    realm = realm_of(request.app.state.settings, _bearer(request))
    if realm is None:
        raise HTTPException(401, "invalid bearer credential", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return realm


async def operator_only(realm: Realm = Depends(authenticated)) -> Realm:
    if realm is not Realm.OPERATOR:
        raise HTTPException(403, "this operation needs the operator credential; the fleet API key cannot reach it")
    return realm
