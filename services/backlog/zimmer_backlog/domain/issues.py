"""Seed 000's issue rules: which (key, issue URL, source, payload) the backlog takes. Pure.

The rules are the backlog's to decide (DESIGN §2, issue 30 #1): the contract (`AppendItem`) holds
the shape of an append only, the gateway and MCP validate that shape, and the backlog refuses an
append that breaks these rules with `invalid` naming the field (`admitted`), on every path: RPC,
REST and MCP (through the backlog's RPC) and the import. The table keeps CHECKs behind them.
"""

from __future__ import annotations

import re
from typing import Any

from zimmer_common.contracts.backlog import ISSUE_URL_PATTERN, AppendItem, canonical_key
from zimmer_common.errors import ErrorCode, ZimmerError

GITHUB_ISSUE_URL = re.compile(ISSUE_URL_PATTERN)  # the contract's, which the OpenAPI document states
ISSUELESS_SOURCES = ("operator", "import")  # seed 000: "An issueless item may only come from a human or the import"

# seed 000: "key: zimmer#498, or manual-<slug> for an item with no issue".
MANUAL_KEY = re.compile(r"^manual-[a-z0-9][a-z0-9._-]*$")
MANUAL_KEY_WORDS = "manual-<slug> (letters, digits, '.', '_' and '-' after 'manual-')"


def issue_key(issue_url: str) -> str | None:
    """The key an issue URL gives (`repo#n`, lower case), or None for a URL that is no issue's."""
    match = GITHUB_ISSUE_URL.match(issue_url)
    return f"{match['repo'].lower()}#{match['number']}" if match else None


def issue_rule_violation(key: str, issue_url: str | None, added_via: str, payload: dict[str, Any] | None = None,
                         *, will_start: bool = True) -> tuple[tuple[str, ...], str] | None:
    """(field path, why) when an item breaks seed 000's issue rules, else None. The one place the
    rule lives (every append, whatever its path, and the import; the database keeps CHECKs).

    - An item without an issue may only come from a human or the import: an issueless row is
      exactly the shape ungated work would take to reach the fleet. Its key is `manual-<slug>`
      (an issue-shaped key would lock the real issue's append out), and it carries the prompt
      the session is started from verbatim (without one it would start a session on nothing).
    - An issue URL is a real GitHub issue URL (https, /{owner}/{repo}/issues/{n}), and the key
      names the same issue, in any case: `{repo}#{n}` or `{owner}/{repo}#{n}`.

    `will_start=False` (an imported history row) checks only who may leave the issue out.
    """
    if issue_url is None:
        if added_via not in ISSUELESS_SOURCES:
            return (("issue_url",), "an item without an issue may only come from an operator or the import: it "
                    "would be ungated work reaching the fleet")
        if not will_start:
            return None
        if not MANUAL_KEY.match(key.lower()):
            return (("key",), f"an item without an issue has the key {MANUAL_KEY_WORDS}; an issue-shaped key "
                    "needs its issue_url")
        prompt = (payload or {}).get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return (("payload", "prompt"), "an item without an issue needs payload.prompt: its session is started "
                    "from that prompt verbatim")
        return None
    match = GITHUB_ISSUE_URL.match(issue_url)
    if match is None:
        return (("issue_url",), "must be a GitHub issue URL: https://github.com/{owner}/{repo}/issues/{number}")
    name, sep, number = key.lower().rpartition("#")
    names = {match["repo"].lower(), f"{match['owner']}/{match['repo']}".lower()}
    if not sep or name not in names or number != match["number"]:
        return (("key",), f"the key must name the issue it points to: {match['repo'].lower()}#{match['number']}")
    return None


def admitted(req: AppendItem) -> AppendItem:
    """The append as the backlog takes it: the issue rules met, then its key in its one spelling
    (so the idempotency key, the one-open-row check and the row all see one spelling per issue).
    An append that breaks a rule is `invalid`, naming the field as a contract's refusal does
    (`field`, and `errors` with its `loc`)."""
    bad = issue_rule_violation(req.key, req.issue_url, req.added_via, req.payload)
    if bad is not None:
        loc, why = bad
        raise ZimmerError(ErrorCode.INVALID, why, {"field": ".".join(loc),
                                                   "errors": [{"type": "issue_rule", "loc": list(loc), "msg": why}]})
    key = canonical_key(req.key)
    return req if key == req.key else req.model_copy(update={"key": key})
