"""The key's one spelling (issue 27 #1, #6): pure rules over every spelling of an issue."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zimmer_backlog.domain.issues import issue_key, issue_rule_violation
from zimmer_common.contracts.backlog import canonical_key

owners = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,10}", fullmatch=True)
repos = st.from_regex(r"[A-Za-z0-9._-]{1,12}", fullmatch=True).filter(lambda r: "#" not in r)
numbers = st.integers(min_value=1, max_value=10**9)


def recased(word: str, flips: list[bool]) -> str:
    return "".join(ch.swapcase() if flip else ch for ch, flip in zip(word, flips + [False] * len(word), strict=False))


@given(owners, repos, numbers, st.lists(st.booleans(), max_size=24), st.booleans())
def test_every_spelling_the_rule_accepts_is_the_urls_one_key(owner: str, repo: str, number: int, flips: list[bool],
                                                             with_owner: bool) -> None:
    url = f"https://github.com/{recased(owner, flips)}/{recased(repo, flips[::-1])}/issues/{number}"
    key = (f"{owner}/" if with_owner else "") + f"{recased(repo, flips[1:])}#{number}"
    assert issue_rule_violation(key, url, "rest") is None
    assert canonical_key(key) == issue_key(url) == f"{repo.lower()}#{number}"


@given(st.text(min_size=1, max_size=40))
def test_the_canonical_spelling_is_its_own_canonical_spelling(key: str) -> None:
    assert canonical_key(canonical_key(key)) == canonical_key(key)


def test_an_issue_key_needs_its_issue_and_an_issueless_key_is_manual() -> None:
    prompt = {"prompt": "Tidy the README"}
    assert issue_rule_violation("zimmer#500", None, "operator", prompt) is not None
    assert issue_rule_violation("Manual-Tidy", None, "operator", prompt) is None
    assert issue_rule_violation("manual-tidy", None, "operator", {})[0] == ("payload", "prompt")  # type: ignore[index]  # a violation here: not None
    assert issue_rule_violation("manual-tidy", None, "operator", {"prompt": 7})[0] == ("payload", "prompt")  # type: ignore[index]  # a violation here: not None
    # A history row of the import keeps the spelling of its day.
    assert issue_rule_violation("zimmer#7", None, "import", {}, will_start=False) is None
    assert issue_rule_violation("zimmer#7", "https://github.com/acme/zimmer/issues/8", "rest") is not None
    assert issue_rule_violation("other/zimmer#7", "https://github.com/acme/zimmer/issues/7", "rest") is not None
