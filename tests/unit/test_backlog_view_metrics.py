"""Every number the Issues view's GitHub side shows is a metric (zimmer_backlog_issues_view)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from zimmer_backlog.metrics import BacklogMetrics
from zimmer_common.contracts import backlog as c

SHOWN = ("stranded_total", "stranded_closed_in_github", "awaiting_total", "awaiting_closed_in_github", "held",
         "not_on_queue_total", "queued_closed_in_github")


def test_each_figure_of_the_view_is_exported_under_its_name() -> None:
    registry = CollectorRegistry()
    metrics = BacklogMetrics(registry)
    figures = {name: n for n, name in enumerate(SHOWN, start=3)}
    view = c.IssuesView(stranded=[], awaiting=[], not_on_queue=[], trend=[], snapshot_at=None, **figures)
    metrics.observe_view(view)
    for name, value in figures.items():
        assert registry.get_sample_value("zimmer_backlog_issues_view", {"figure": name}) == value, name
