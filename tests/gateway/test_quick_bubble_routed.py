"""Where the chat bubble's Submit goes back to (web/quick_bubble.routed): the page it was opened on,
its own query kept and the notice's added, never another site."""

from __future__ import annotations

import pytest

from zimmer_gateway.web.pages import HOME
from zimmer_gateway.web.quick_bubble import routed


@pytest.mark.parametrize(("back", "spot", "location"), [
    ("/sessions", False, "/sessions?quick=5"),
    ("/ranked?filter=all", True, "/ranked?filter=all&quick=5&quick_class=spot"),
    ("/ranked?filter=all&quick=4&quick_class=spot", False, "/ranked?filter=all&quick=5"),  # an earlier notice replaced
    ("//evil.example/x", False, f"{HOME}?quick=5"),
    ("https://evil.example/", False, f"{HOME}?quick=5"),
    ("/health#alerts", False, "/health?quick=5"),
    ("/" + "a" * 100_000, False, f"{HOME}?quick=5"),  # no page of ours: a Location no client follows
])
def test_back_to_the_page_it_came_from_with_the_notice(back: str, spot: bool, location: str) -> None:
    answer = routed(back, 5, spot)
    assert answer.status_code == 303
    assert answer.headers["location"] == location
