"""The spot-gate REST API (seed 004, issue 3 "Surfaces"): sessions, turns, triggers, policy, costs.

Every route needs a credential (the fleet key or the operator token); `acting_session_id` is
provenance only and never authorizes anything. Each route is one RPC to spot-gate, which does
the whole change in one transaction, so a refused request leaves nothing half-written.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from zimmer_gateway.auth import authenticated
from zimmer_gateway.routes import policy, sessions, triggers

router = APIRouter(dependencies=[Depends(authenticated)])
router.include_router(sessions.router)
router.include_router(triggers.router)
router.include_router(policy.router)
