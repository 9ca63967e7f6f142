"""Issue 27 #7: the limits docs/backlog.md states are the ones the contract enforces. The table is
generated from the contract models' field constraints; this test fails when the committed table
and the code disagree (regenerate it with `python -m zimmer_common.contracts.limits`)."""

from __future__ import annotations

from pathlib import Path

from zimmer_common.contracts import backlog as c
from zimmer_common.contracts.fields import LONG_TEXT_MAX, NAME_MAX, PAYLOAD_MAX_BYTES, TITLE_MAX
from zimmer_common.contracts.limits import BEGIN, END, backlog_models, bounds, limits_table, max_length, with_table

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_limits_table_is_the_generated_one() -> None:
    doc = (ROOT / "docs/backlog.md").read_text()
    assert BEGIN in doc and END in doc, "docs/backlog.md lost its limits markers"
    assert doc == with_table(doc, limits_table(backlog_models())), (
        "docs/backlog.md's limits table differs from the contract: run `python -m zimmer_common.contracts.limits`")


def test_the_table_states_what_the_fields_enforce() -> None:
    table = limits_table(backlog_models())
    assert f"| `AppendItem` | `key` | 1–{NAME_MAX:,} characters |" in table
    assert f"| `AppendItem` | `title` | at most {TITLE_MAX:,} characters |" in table
    assert f"| `AppendItem` | `issue_url` | at most {LONG_TEXT_MAX:,} characters |" in table
    assert f"| `RemoveItem` | `reason` | 1–{LONG_TEXT_MAX:,} characters |" in table
    assert f"| `HoldItem` | `reason` | 1–{LONG_TEXT_MAX:,} characters |" in table
    assert f"| `AppendItem` | `payload` | at most {PAYLOAD_MAX_BYTES:,} bytes as compact JSON |" in table
    assert "| `PinItem` | `precedence` | -2,147,483,648 to 2,147,483,647 |" in table
    # The numbers the issue found documented and never enforced are gone from the docs.
    doc = (ROOT / "docs/backlog.md").read_text()
    assert "long texts 100,000" not in doc and "texts 500 characters" not in doc


def test_bounds_are_what_the_model_refuses() -> None:
    """The reader of constraints agrees with validation itself, at the edge."""
    for model, field in ((c.RemoveItem, "reason"), (c.HoldItem, "reason")):
        limit = max_length(model, field)
        model(item_id=1, reason="x" * limit)
        try:
            model(item_id=1, reason="x" * (limit + 1))
        except ValueError:
            pass
        else:
            raise AssertionError(f"{model.__name__}.{field} took {limit + 1} characters")
    assert bounds(c.AppendItem, "payload") == {"max_bytes": PAYLOAD_MAX_BYTES}
