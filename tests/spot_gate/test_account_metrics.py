"""Each account's series (issue 32 #3): every number of the Quotas page's account table has one; a
figure the account has none of has no series (never a made-up 0), and an account that leaves the
view takes its series with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry

from zimmer_common.contracts import spot_policy as p
from zimmer_spot_gate.account_metrics import AccountMetrics

NOW = datetime(2026, 8, 20, 10, 0, tzinfo=UTC)


def account(name: str, status: str = "active", **changes: object) -> p.AccountView:
    fields: dict[str, object] = dict(
        account=name, status=status, serving=False, read_at=NOW - timedelta(minutes=5), reading_age_seconds=300.0,
        stale=False, five_hour=p.AccountWindowView(utilization=1.2, resets_at=NOW + timedelta(hours=1),
                                                   rolled_over=False, counted_as=1.0),
        seven_day=None, out_of_capacity=True, back_at=NOW + timedelta(hours=1))
    return p.AccountView(**{**fields, **changes})  # type: ignore[arg-type]  # the test's fields are the model's


def view(*accounts: p.AccountView) -> p.PolicyView:
    return p.PolicyView.model_construct(accounts=list(accounts))


def test_each_accounts_figures_have_their_series_and_leave_with_it() -> None:
    registry = CollectorRegistry()
    metrics = AccountMetrics(registry)
    metrics.observe(view(account("a"), account("b", "needs_reauth", five_hour=None, back_at=None,
                                                out_of_capacity=False)), NOW)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("zimmer_spot_account_utilization", account="a", window="five_hour") == 1.2
    assert value("zimmer_spot_account_counted_utilization", account="a", window="five_hour") == 1.0
    assert value("zimmer_spot_account_reset_seconds", account="a", window="five_hour") == 3600
    assert value("zimmer_spot_account_back_seconds", account="a") == 3600
    assert value("zimmer_spot_account_reading_age_seconds", account="a") == 300
    assert value("zimmer_spot_account_status", account="b", status="needs_reauth") == 1
    assert value("zimmer_spot_account_status", account="b", status="active") == 0
    assert value("zimmer_spot_account_utilization", account="b", window="five_hour") is None  # not read: no series
    assert value("zimmer_spot_account_utilization", account="a", window="seven_day") is None
    assert value("zimmer_spot_account_back_seconds", account="b") is None

    metrics.observe(view(account("b", "active", five_hour=None)), NOW + timedelta(hours=2))
    assert value("zimmer_spot_account_utilization", account="a", window="five_hour") is None  # gone with it
    assert value("zimmer_spot_account_status", account="a", status="active") is None
    assert value("zimmer_spot_account_status", account="b", status="active") == 1
    assert value("zimmer_spot_account_back_seconds", account="b") is None  # its reset has passed
