"""Where a session's class comes from (seed 004, "Where the class comes from", "Genesis",
"Genesis is inherited", "Stored only when someone chose it", and the precedence rules).

Three sources, first one that speaks wins: the session's own `scheduling_class` (which a
trigger's class is stamped into when it fires), then the genesis default through the override
map. The class is resolved on every read while the column is NULL, so changing a default moves
every deriving session, past and future; changing a trigger's class moves nothing it already
spawned, because the trigger's selector was read once, at fire time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zimmer_spot_gate.domain.model import Genesis, SchedulingClass

PRIORITY, SPOT = SchedulingClass.PRIORITY, SchedulingClass.SPOT

DEFAULT_GENESIS_CLASS: dict[Genesis, SchedulingClass] = {
    Genesis.WEB_UI: PRIORITY,
    Genesis.SLACK: PRIORITY,
    Genesis.GITHUB_ISSUE: SPOT,
    Genesis.GITHUB_LABEL: SPOT,
    Genesis.SCHEDULE: SPOT,
    Genesis.AO_EVENT: SPOT,
    Genesis.API: SPOT,
    # A session Zimmer cannot explain is never one it throttles: the classifier fails to "runs anyway".
    Genesis.UNKNOWN: PRIORITY,
}

# Kinds a trigger produces: their class lives on each trigger, so one noisy Slack trigger can be
# spot without demoting the others. Only the remaining kinds have a per-kind policy setting.
TRIGGER_KINDS = frozenset({Genesis.SLACK, Genesis.GITHUB_ISSUE, Genesis.GITHUB_LABEL, Genesis.SCHEDULE,
                           Genesis.AO_EVENT})
POLICY_KINDS = frozenset(Genesis) - TRIGGER_KINDS


class ClassRuleError(ValueError):
    """A request the class rules refuse; the message names what is wrong."""


def resolve_class(own: SchedulingClass | None, genesis: Genesis,
                  overrides: Mapping[Genesis, SchedulingClass]) -> SchedulingClass:
    if own is not None:
        return own
    return overrides.get(genesis, DEFAULT_GENESIS_CLASS[genesis])


def set_genesis_override(overrides: Mapping[Genesis, SchedulingClass], genesis: Genesis,
                         cls: SchedulingClass) -> dict[Genesis, SchedulingClass]:
    """promote_genesis / demote_genesis: only for the kinds no trigger produces."""
    if genesis in TRIGGER_KINDS:
        raise ClassRuleError(f"genesis {genesis.value} is produced by triggers; set the class on the trigger instead")
    updated = dict(overrides)
    if cls == DEFAULT_GENESIS_CLASS[genesis]:
        updated.pop(genesis, None)  # back to the default: store nothing
    else:
        updated[genesis] = cls
    return updated


@dataclass(frozen=True)
class Lineage:
    """What a new session can inherit from its parent (or the session it forks)."""

    genesis: Genesis
    scheduling_class: SchedulingClass | None
    precedence: int


@dataclass(frozen=True)
class Origin:
    genesis: Genesis
    scheduling_class: SchedulingClass | None
    precedence: int


def originate(*, lineage: Lineage | None, declared_genesis: Genesis | None, declared_class: SchedulingClass | None,
              declared_precedence: int | None, default_genesis: Genesis,
              trigger_class: SchedulingClass | None = None, trigger_precedence: int | None = None) -> Origin:
    """Genesis, stored class and precedence of a session being created.

    - genesis: declared explicitly, else the parent's (or forked-from's) verbatim, else the
      creator's default (`api` for the API, the trigger's kind when a trigger fires);
    - class: declared, else the firing trigger's class (stamped once), else the parent's
      explicit class (inherited the same way as genesis) unless a genesis is declared, else
      NULL (derived on every read). A declared genesis outranks inheritance: the chat bubble
      carries a parent so the conversation threads, but a human typed it, so it declares web_ui
      rather than inheriting spot from whatever session was on screen;
    - precedence: declared, else one above the parent (lineage still gives it), else the
      trigger's predefined one, else 0.
    """
    genesis = declared_genesis or (lineage.genesis if lineage else default_genesis)
    inherited = lineage.scheduling_class if lineage is not None and declared_genesis is None else None
    cls = declared_class or trigger_class or inherited
    if declared_precedence is not None:
        precedence = declared_precedence
    elif lineage is not None:
        precedence = lineage.precedence + 1
    elif trigger_precedence is not None:
        precedence = trigger_precedence
    else:
        precedence = 0
    return Origin(genesis, cls, precedence)
