"""When a terminated message pages: the first of a kind at once, then one a window per kind, each
counting what the window left unpaged."""

from __future__ import annotations

from zimmer_common.consumer import TerminationPages


def test_one_page_a_window_per_kind_counting_the_rest() -> None:
    now = [0.0]
    pages = TerminationPages(every=60.0, monotonic=lambda: now[0])
    assert pages.due("undecodable") == 0  # the first pages at once
    assert [pages.due("undecodable") for _ in range(5)] == [None] * 5  # counted, not paged
    assert pages.due("newer_version session_created") == 0  # another kind has its own window
    now[0] = 59.9
    assert pages.due("undecodable") is None
    now[0] = 60.0
    assert pages.due("undecodable") == 6  # the window passed: it pages, naming the six left out
    assert pages.due("undecodable") is None
    now[0] = 200.0
    assert pages.due("undecodable") == 1
    assert pages.due("newer_version session_created") == 0
