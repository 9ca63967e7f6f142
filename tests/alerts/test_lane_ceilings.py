"""A deployment may set a lane's execution ceiling (ZIMMER_ALERT_LANE_CEILINGS, for drills such as
the stall scenario's short form); anything else keeps the seed's, and a bad value refuses to start."""

from __future__ import annotations

from datetime import timedelta

import pytest

from zimmer_alerts.config import AlertSettings
from zimmer_alerts.domain.queues import execution_ceiling
from zimmer_common.settings import ConfigurationError


def test_unset_keeps_the_seeds_ceilings() -> None:
    ceilings = AlertSettings(alert_lane_ceilings="").lane_ceilings()
    assert ceilings == {}
    assert execution_ceiling("default", ceilings) == timedelta(minutes=15)
    assert execution_ceiling("maintenance", ceilings) == timedelta(minutes=90)
    assert execution_ceiling("not-a-lane", ceilings) is None


def test_a_set_lane_uses_its_own_and_the_others_the_seeds() -> None:
    ceilings = AlertSettings(alert_lane_ceilings='{"default": 30, "auth": 90.5}').lane_ceilings()
    assert ceilings == {"default": timedelta(seconds=30), "auth": timedelta(seconds=90.5)}
    assert execution_ceiling("default", ceilings) == timedelta(seconds=30)
    assert execution_ceiling("pollers", ceilings) == timedelta(minutes=15)


@pytest.mark.parametrize(("value", "says"), [
    ('{"nope": 30}', "unknown lane 'nope'"),
    ('{"default": 0}', "above 0"),
    ('{"default": 86401}', "at most a day"),
    ('{"default": true}', "must be a number"),
    ('{"default": "30"}', "must be a number"),
    ("[30]", "not an object"),
    ("{default: 30}", "not valid"),
])
def test_a_bad_value_refuses_to_start_and_says_why(value: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match="ZIMMER_ALERT_LANE_CEILINGS") as raised:
        AlertSettings(alert_lane_ceilings=value).lane_ceilings()
    assert says in str(raised.value)
