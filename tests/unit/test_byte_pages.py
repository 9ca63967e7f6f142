"""Issue 27 #13: a list pages by bytes as well as by count. The rule (`rows_that_fit`) is pure;
hypothesis checks it over arbitrary row sizes, and that following `next_offset` reads every row
exactly once whatever the sizes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zimmer_common.byte_pages import answer_budget, next_offset, rows_that_fit

sizes_st = st.lists(st.integers(min_value=0, max_value=5_000), max_size=60)
budget_st = st.integers(min_value=1, max_value=20_000)
limit_st = st.integers(min_value=1, max_value=70)


@given(sizes_st, budget_st, limit_st)
def test_a_page_fits_its_budget_takes_all_it_can_and_never_none(sizes: list[int], budget: int, limit: int) -> None:
    n = rows_that_fit(sizes, budget, limit)
    assert n <= min(len(sizes), limit)
    if sizes:
        assert n >= 1  # a page that carried nothing would never end
    if n > 1:
        assert sum(sizes[:n]) <= budget
    if n < min(len(sizes), limit):
        assert sum(sizes[:n + 1]) > budget  # maximal: the next row would not have fit


@given(sizes_st, budget_st, limit_st)
def test_following_next_offset_reads_every_row_exactly_once(sizes: list[int], budget: int, limit: int) -> None:
    read: list[int] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        n = rows_that_fit(sizes[offset:], budget, limit)
        read.extend(range(offset, offset + n))
        offset = next_offset(offset, n, len(sizes))
        pages += 1
        assert pages <= len(sizes) + 1
    assert read == list(range(len(sizes)))


def test_the_budget_is_half_a_message_at_most_the_ceiling() -> None:
    assert answer_budget(1024 * 1024) == 512 * 1024
    assert answer_budget(64 * 1024) == 32 * 1024
    assert answer_budget(8 * 1024 * 1024) == 512 * 1024
