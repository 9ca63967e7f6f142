"""Credentials: the fleet's shared API key and the operator token, both `Authorization: Bearer`.

The fleet key reaches the agent/script API; operator-only routes need the operator token and
answer 403 to the fleet key (DESIGN §6 is stricter than the seed here on purpose). Tokens are
compared in constant time. The dependencies are `async def` although they never wait:
FastAPI runs a plain `def` dependency in a worker thread, a handoff on every request.
"""

from __future__ import annotations

import hmac
from enum import StrEnum
from typing import Final

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from zimmer_common.settings import Settings

# Where the edge middleware leaves the realm it authenticated (zimmer_gateway.edge).
REALM_SCOPE_KEY: Final = "zimmer.realm"
# Declares the bearer scheme in OpenAPI; the check itself is `authenticated`.
bearer_scheme = HTTPBearer(auto_error=False, scheme_name="bearer",
                           description="The fleet's API key (ZIMMER_API_KEY) or the operator token "
                                       "(ZIMMER_OPERATOR_TOKEN)")


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


async def authenticated(request: Request,
                        _declared: HTTPAuthorizationCredentials | None = Depends(bearer_scheme)) -> Realm:
    """Any valid credential: the fleet key or the operator token. The edge middleware has
    already checked it before the body was read; this is what routes depend on."""
    realm = request.scope.get(REALM_SCOPE_KEY)
    if isinstance(realm, Realm):
        return realm
    realm = realm_of(request.app.state.settings, _bearer(request))
    if realm is None:
        raise HTTPException(401, "invalid bearer credential", headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return realm


async def operator_only(realm: Realm = Depends(authenticated)) -> Realm:
    if realm is not Realm.OPERATOR:
        raise HTTPException(403, "this operation needs the operator credential; the fleet API key cannot reach it")
    return realm
