"""Genesis, class resolution and inheritance tables (seed 004)."""

from __future__ import annotations

import pytest

from zimmer_spot_gate.domain.classes import (
    DEFAULT_GENESIS_CLASS,
    POLICY_KINDS,
    TRIGGER_KINDS,
    ClassRuleError,
    Lineage,
    originate,
    resolve_class,
    set_genesis_override,
)
from zimmer_spot_gate.domain.model import Genesis as G
from zimmer_spot_gate.domain.model import SchedulingClass as C


def test_default_class_per_genesis() -> None:
    assert {g.value: c.value for g, c in DEFAULT_GENESIS_CLASS.items()} == {
        "web_ui": "priority", "slack": "priority", "github_issue": "spot", "github_label": "spot",
        "schedule": "spot", "ao_event": "spot", "api": "spot", "unknown": "priority"}
    assert POLICY_KINDS == {G.WEB_UI, G.API, G.UNKNOWN} and len(TRIGGER_KINDS) == 5


def test_own_class_wins_then_the_override_then_the_default() -> None:
    assert resolve_class(C.PRIORITY, G.SCHEDULE, {}) is C.PRIORITY
    assert resolve_class(None, G.WEB_UI, {G.WEB_UI: C.SPOT}) is C.SPOT
    assert resolve_class(None, G.WEB_UI, {}) is C.PRIORITY


def test_changing_a_default_moves_existing_deriving_sessions() -> None:
    stored = [(None, G.API), (C.PRIORITY, G.API)]  # one derives, one chose
    overrides = set_genesis_override({}, G.API, C.PRIORITY)
    assert [resolve_class(own, g, overrides) for own, g in stored] == [C.PRIORITY, C.PRIORITY]
    overrides = set_genesis_override(overrides, G.API, C.SPOT)  # back to default: nothing stored
    assert overrides == {}
    assert [resolve_class(own, g, overrides) for own, g in stored] == [C.SPOT, C.PRIORITY]


@pytest.mark.parametrize("kind", sorted(TRIGGER_KINDS))
def test_promote_and_demote_only_for_kinds_no_trigger_produces(kind: G) -> None:
    with pytest.raises(ClassRuleError, match="trigger"):
        set_genesis_override({}, kind, C.PRIORITY)


PARENT = Lineage(G.GITHUB_ISSUE, None, 5)


@pytest.mark.parametrize(("kwargs", "expected"), [
    # a child takes its parent's genesis verbatim and lands one above it
    (dict(lineage=PARENT), (G.GITHUB_ISSUE, None, 6)),
    # a declared genesis outranks inheritance (the chat bubble threads under a parent but a human typed it)
    (dict(lineage=PARENT, declared_genesis=G.WEB_UI), (G.WEB_UI, None, 6)),
    # an explicit class is inherited the same way
    (dict(lineage=Lineage(G.WEB_UI, C.SPOT, 0)), (G.WEB_UI, C.SPOT, 1)),
    # no parent: the creator's default genesis, precedence 0
    (dict(lineage=None), (G.API, None, 0)),
    # a trigger stamps its class and predefined precedence at fire time
    (dict(lineage=None, default_genesis=G.SCHEDULE, trigger_class=C.PRIORITY, trigger_precedence=7), (G.SCHEDULE, C.PRIORITY, 7)),
    # declared precedence wins over everything
    (dict(lineage=PARENT, declared_precedence=-3), (G.GITHUB_ISSUE, None, -3)),
])
def test_origin_table(kwargs: dict, expected: tuple) -> None:  # type: ignore[type-arg]  # the table's rows, of several shapes
    base = dict(declared_genesis=None, declared_class=None, declared_precedence=None, default_genesis=G.API)
    o = originate(**{**base, **kwargs})
    assert (o.genesis, o.scheduling_class, o.precedence) == expected
