"""A session's lifecycle as a transition table (seed 004's statuses).

waiting      created, or dormant: held at the gate, paused, asleep
running      a turn is in flight
needs_input  the turn ended; the session waits on a person
archived     done (ended)
failed       crashed (ended)

What reports a status (the runtime, a script) may move a session along these edges only; a
report of the status a session already has changes nothing. Two guards beyond the table:
an ended session takes nothing (not a status, not a class change), and a session the gate
holds is not started by a report: only the gate starts it, or a person making it priority.
"""

from __future__ import annotations

from zimmer_spot_gate.domain.model import SessionStatus as S

ENDED = frozenset({S.ARCHIVED, S.FAILED})

TRANSITIONS: dict[S, frozenset[S]] = {
    S.WAITING: frozenset({S.RUNNING, S.NEEDS_INPUT, S.ARCHIVED, S.FAILED}),
    # running → waiting: a pause or a sleep stops the turn and leaves it dormant.
    S.RUNNING: frozenset({S.NEEDS_INPUT, S.WAITING, S.ARCHIVED, S.FAILED}),
    # needs_input → waiting: the pause callback carries a paused session back to dormant.
    S.NEEDS_INPUT: frozenset({S.RUNNING, S.WAITING, S.ARCHIVED, S.FAILED}),
    S.ARCHIVED: frozenset(),
    S.FAILED: frozenset(),
}


class IllegalTransition(ValueError):
    def __init__(self, current: S, wanted: S, why: str):
        self.current, self.wanted = current, wanted
        super().__init__(why)


def check_transition(current: S, wanted: S, *, held: bool) -> None:
    """Raise `IllegalTransition` (saying why) unless a report may move `current` to `wanted`."""
    if current == wanted:
        return
    if current in ENDED:
        raise IllegalTransition(current, wanted, f"the session is {current.value}; it takes no more status changes")
    if wanted not in TRANSITIONS[current]:
        raise IllegalTransition(current, wanted, f"a {current.value} session cannot become {wanted.value}")
    if held and wanted is S.RUNNING:
        raise IllegalTransition(current, wanted, "the spot gate holds this session; only the gate starts it "
                                "(or making it priority)")


def check_changeable(current: S) -> None:
    """A class or precedence change is refused for an ended session."""
    if current in ENDED:
        raise IllegalTransition(current, current, f"the session is {current.value}; its class and precedence "
                                "no longer change")
