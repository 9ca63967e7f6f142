"""The OpenAPI document states what the gateway enforces, and the gateway takes what it states
(issue 31 #7): integer bounds as integers (an id up to 2^63 - 1, not the float 2^63), a whole
number written with a decimal point is an integer, one rule for times in the query string and in
a body (RFC 3339, years 1970 to 9998, the pattern in the document), exactly one of a pull's
`count` and `keys` (`oneOf`), at least one change in a patch (`anyOf`), no NUL in any string or
free-form key. tests/contract/test_openapi_fuzz.py checks it all by generated requests; these
name each class of mismatch it found."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from problems import invalid_fields, refused
from pydantic import ValidationError

from zimmer_common.contracts.backlog import PullItems
from zimmer_common.contracts.fields import NO_NUL, TIME_PATTERN, WORDS
from zimmer_common.contracts.health import SUBJECT_FILTER_PATTERN, LaneName, QueuedScope
from zimmer_common.contracts.spot import ReorderSession, UpdateSession
from zimmer_common.lanes import LANES
from zimmer_gateway.openapi_doc import exact_integer_bounds, no_nul_strings

ID_MAX = 2**63 - 1
OPERATOR = {"Authorization": "Bearer test-operator-token"}
ITEMS = "/api/v1/work_backlog_items"


# ---- the request contracts (no server) ----------------------------------------------------

def test_a_whole_number_with_a_decimal_point_is_an_integer_anywhere_in_a_request() -> None:
    assert PullItems.model_validate({"count": 3.0, "acting_session_id": 57285.0}).acting_session_id == 57285
    assert UpdateSession.model_validate({"session_id": 7.0, "precedence": -67108864.0}).precedence == -67108864
    assert QueuedScope.model_validate({"lane": "default"}).lane == "default"
    pulled = PullItems.model_validate({"keys": ["zimmer#1"], "removals": [], "wip_ceiling": 1e3})
    assert pulled.wip_ceiling == 1000 and isinstance(pulled.wip_ceiling, int)
    for bad in ({"count": 3.5}, {"count": "3"}, {"count": True}, {"count": float("inf")}, {"count": 11.0}):
        with pytest.raises(ValidationError) as caught:
            PullItems.model_validate(bad)
        assert caught.value.errors()[0]["loc"] == ("count",), bad
    with pytest.raises(ValidationError):  # past the bound as a float too
        ReorderSession.model_validate({"session_id": 1, "above_session_id": float(2**63)})


@pytest.mark.parametrize("given", ["2026-12-01T14:02:00Z", "2026-12-01T15:02:00.123456+01:00",
                                   "1970-01-01T00:00:00+01:00", "9998-12-31T23:59:59-23:59"])
def test_a_time_in_the_one_spelling_is_taken(given: str) -> None:
    assert re.fullmatch(TIME_PATTERN, given)
    from zimmer_common.contracts.alerts import AlertQuery

    assert AlertQuery.model_validate({"since": given}).since is not None


@pytest.mark.parametrize("given", ["0", "0.5", "1700000000", "2026-01-01", "2026-01-01T00:00:00",
                                   "2026-01-01t00:00:00z", "1969-12-31T23:59:59Z", "9999-01-01T00:00:00Z",
                                   "2026-01-01T00:00:00.1234567Z", "2026-01-01T00:00:00Z\n", 0, 0.5, 1700000000])
def test_any_other_time_is_refused_naming_the_field(given: Any) -> None:
    from zimmer_common.contracts.alerts import AlertQuery

    if isinstance(given, str):
        assert not re.fullmatch(TIME_PATTERN, given)
    with pytest.raises(ValidationError) as caught:
        AlertQuery.model_validate({"since": given})
    assert caught.value.errors()[0]["loc"] == ("since",)


def test_the_lane_names_are_the_lanes_and_subject_filters_are_stated() -> None:
    assert set(LaneName.__args__) == set(LANES)  # type: ignore[attr-defined]  # a Literal alias keeps its values in __args__
    ok = ["zimmer.jobs.>", "zimmer.jobs.*.default.>", "zimmer.jobs.spot.default.wake"]
    bad = ["zimmer.jobs", "zimmer.jobs.a b", "zimmer.jobs.a>", "zimmer.jobs.>.a", "other.jobs.x", "zimmer.jobs.a\x1cb"]
    assert all(re.fullmatch(SUBJECT_FILTER_PATTERN, s) for s in ok)
    assert not any(re.fullmatch(SUBJECT_FILTER_PATTERN, s) for s in bad)
    assert not re.search(WORDS, " \t\x1c\x85\u3000") and re.search(WORDS, " a ") and not re.search(WORDS, "a\x00")
    assert not re.fullmatch(NO_NUL, "a\x00b") and re.fullmatch(NO_NUL, "ab")


def test_the_document_post_processing() -> None:
    spec: dict[str, Any] = {
        "paths": {"/x": {"post": {"parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}]}}},
        "components": {"schemas": {"B": {"type": "object", "properties": {
            "id": {"anyOf": [{"type": "integer", "minimum": 1.0, "maximum": float(ID_MAX)}, {"type": "null"}]},
            "n": {"type": "number", "maximum": 10.5},
            "meta": {"type": "object", "additionalProperties": True},
            "key": {"type": "string", "pattern": "^[a-z]+$"}}}}}}
    no_nul_strings(exact_integer_bounds(spec))
    props = spec["components"]["schemas"]["B"]["properties"]
    assert props["id"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": ID_MAX}
    assert type(props["id"]["anyOf"][0]["minimum"]) is int and props["n"]["maximum"] == 10.5
    assert props["meta"]["propertyNames"] == {"pattern": NO_NUL}
    assert props["meta"]["additionalProperties"] == {"$ref": "#/components/schemas/StoredJsonValue"}
    assert props["key"]["pattern"] == "^[a-z]+$"
    assert spec["paths"]["/x"]["post"]["parameters"][0]["schema"]["pattern"] == NO_NUL
    assert "StoredJsonValue" in spec["components"]["schemas"]


# ---- the served document and the server ---------------------------------------------------

def _integer_bounds(node: Any) -> list[Any]:
    found: list[Any] = []
    if isinstance(node, dict):
        if node.get("type") == "integer":
            found += [node[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in node]
        for value in node.values():
            found += _integer_bounds(value)
    elif isinstance(node, list):
        for value in node:
            found += _integer_bounds(value)
    return found


async def test_the_document_states_the_rules_and_the_server_takes_what_it_states(http: httpx.AsyncClient) -> None:
    spec = (await http.get("/openapi.json")).json()
    schemas = spec["components"]["schemas"]
    # Integer bounds are integers; an id's maximum is 2^63 - 1 (FastAPI wrote the float 2^63).
    bounds = _integer_bounds(spec)
    assert bounds and all(type(b) is int for b in bounds), [b for b in bounds if type(b) is not int]
    for model, field in (("AppendBody", "acting_session_id"), ("HoldBody", "acting_session_id"),
                         ("PullBody", "acting_session_id"), ("ReorderBody", "above_session_id"),
                         ("ReorderBody", "below_session_id"), ("SpawnSessionBody", "parent_session_id"),
                         ("SpawnSessionBody", "forked_from_session_id")):
        assert schemas[model]["properties"][field]["anyOf"][0]["maximum"] == ID_MAX, (model, field)
    # Exactly one of count and keys; at least one change.
    assert [b["required"] for b in schemas["PullBody"]["oneOf"]] == [["count"], ["keys"]]
    assert {b["required"][0] for b in schemas["SetPolicyBody"]["anyOf"]} == {
        "gating_enabled", "reserve_five_hour_percent", "reserve_seven_day_percent", "max_sessions"}
    assert {b["required"][0] for b in schemas["ReorderBody"]["anyOf"]} == {"above_session_id", "below_session_id"}
    # Times: one rule, stated, in the query and in bodies.
    since = next(p for p in spec["paths"]["/api/v1/alerts"]["get"]["parameters"] if p["name"] == "since")
    assert since["schema"]["anyOf"][0] == {"type": "string", "format": "date-time", "pattern": TIME_PATTERN}
    assert schemas["StatusBody"]["properties"]["at"]["anyOf"][0]["pattern"] == TIME_PATTERN
    # NUL: in free-form objects' keys and values, and in strings.
    assert schemas["SpawnSessionBody"]["properties"]["metadata"]["propertyNames"] == {"pattern": NO_NUL}
    assert schemas["HoldBody"]["properties"]["reason"]["pattern"] == WORDS
    lane = next(p for p in spec["paths"]["/api/v1/health/queued_jobs"]["get"]["parameters"] if p["name"] == "lane")
    assert set(lane["schema"]["anyOf"][0]["enum"]) == set(LANES)

    # 2^63 - 1 is an id the API takes (404: no such session); 2^63 is refused naming the field.
    spawned = await http.post("/api/v1/sessions", json={"start": False})
    assert spawned.status_code == 201, spawned.text
    sid = spawned.json()["session"]["id"]
    reorder = f"/api/v1/sessions/{sid}/reorder_precedence"
    assert (await http.patch(reorder, json={"below_session_id": ID_MAX})).status_code != 422
    assert invalid_fields(await http.patch(reorder, json={"below_session_id": ID_MAX + 1})) == ["below_session_id"]
    assert invalid_fields(await http.patch(reorder, json={"below_session_id": 9223372036854775999})) == [
        "below_session_id"]
    # 57285.0 is the integer 57285; 0.5 is no integer.
    pulled = await http.post(f"{ITEMS}/pull", json={"count": 0.0, "wip_ceiling": 3.0})
    assert pulled.status_code == 200, pulled.text
    assert invalid_fields(await http.post(f"{ITEMS}/pull", json={"count": 0.5})) == ["count"]
    moved = await http.patch(f"/api/v1/sessions/{sid}", json={"precedence": 57285.0})
    assert moved.status_code == 200 and moved.json()["precedence"] == 57285, moved.text
    # A pull takes exactly one of count and keys.
    assert refused(await http.post(f"{ITEMS}/pull", json={"count": 1, "keys": ["zimmer#1"]}), 422)["code"] == "invalid"
    assert refused(await http.post(f"{ITEMS}/pull", json={}), 422)["code"] == "invalid"
    # Query-string times as body times: the one spelling, or a 422 naming the parameter.
    assert (await http.get("/api/v1/alerts", params={"since": "2026-01-01T00:00:00Z"})).status_code == 200
    for bad in ("0", "0.5", "1700000000", "2026-01-01", "2026-01-01T00:00:00", "1969-12-31T23:59:59Z"):
        assert invalid_fields(await http.get("/api/v1/alerts", params={"since": bad})) == ["since"], bad
        assert invalid_fields(await http.get(f"/api/v1/sessions/{sid}/gate_decisions", params={"at": bad})) == [
            "at"], bad
        assert invalid_fields(await http.post(f"/api/v1/sessions/{sid}/status",
                                              json={"status": "running", "at": bad})) == ["at"], bad
    assert (await http.post(f"/api/v1/sessions/{sid}/status",
                            json={"status": "running", "at": "1970-01-01T00:30:00+01:00"})).status_code == 200
    # An unknown fork beside a known parent is a 422 naming it (it was the foreign key's 500).
    assert invalid_fields(await http.post("/api/v1/sessions", json={
        "parent_session_id": sid, "forked_from_session_id": ID_MAX, "start": False})) == ["forked_from_session_id"]
    # NUL in a free-form key is refused, as the document says.
    assert refused(await http.post("/api/v1/sessions", json={"metadata": {"a\u0000": 1}}), 422)["code"] == "invalid"
    # Lanes: a name the document lists, or a 422.
    assert invalid_fields(await http.get("/api/v1/health/queued_jobs", params={"lane": "nope"})) == ["lane"]
    assert (await http.get("/api/v1/health/queued_jobs", params={"lane": "default"})).status_code == 200
