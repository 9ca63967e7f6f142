"""Schemathesis over the gateway's OpenAPI, with both credentials (DESIGN §6; issue "Outages,
deadlines and limits").

Every operation, with generated valid data and generated invalid data, against the real stack:
no server error, every response conforms to its documented schema, every status code and
content type is documented, invalid data is refused, and a request without its credential is
refused. `ZIMMER_FUZZ_EXAMPLES` sets the examples per operation, mode and credential (default
20: about 30 operations × 2 modes × 2 credentials is about 2,000 cases, derandomized so CI runs
the same ones; `ZIMMER_FUZZ_RANDOM=1` explores new ones).

Schemathesis drives hypothesis directly here rather than through its pytest plugin (which does
not run under pytest 9). Hypothesis tests are synchronous and call the live server over HTTP,
so the five services run in a background thread with their own event loop (`live_gateway`).
Every failure of every operation is collected and reported together.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance, ignored_auth, negative_data_rejection, response_headers_conformance,
    response_schema_conformance, status_code_conformance)

EXAMPLES = int(os.environ.get("ZIMMER_FUZZ_EXAMPLES", "20"))
RANDOM = os.environ.get("ZIMMER_FUZZ_RANDOM")
CREDENTIALS = {"fleet": "test-fleet-key", "operator": "test-operator-token"}
@schemathesis.check
def rejects_invalid_data(ctx, response, case):  # type: ignore[no-untyped-def]
    """schemathesis' negative_data_rejection, with 413 among the rejections: invalid data that
    also makes the body larger than ZIMMER_MAX_BODY_BYTES is refused before it is read."""
    if response.status_code == 413:
        return None
    return negative_data_rejection(ctx, response, case)


CHECKS = {
    GenerationMode.POSITIVE: [not_a_server_error, response_schema_conformance, status_code_conformance,
                              content_type_conformance, response_headers_conformance, ignored_auth],
    GenerationMode.NEGATIVE: [not_a_server_error, response_schema_conformance, status_code_conformance,
                              content_type_conformance, response_headers_conformance, rejects_invalid_data],
}
MIN_CASES = 1000


@pytest.mark.parametrize("credential", sorted(CREDENTIALS))
def test_every_operation_holds_its_contract(live_gateway: str, credential: str) -> None:
    api = schemathesis.openapi.from_url(f"{live_gateway}/openapi.json")
    statuses: Counter[int] = Counter()
    failures: list[str] = []
    for result in api.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failure = _fuzz(operation, mode, credential, live_gateway, statuses)
            if failure:
                failures.append(f"{operation.label} [{mode.value}]: {failure}")
    total = sum(statuses.values())
    print(f"\nschemathesis with the {credential} credential: {total} cases, statuses {dict(sorted(statuses.items()))}")
    assert not failures, "\n\n".join(failures)
    assert statuses[500] == 0
    if EXAMPLES >= 20:
        assert total >= MIN_CASES / len(CREDENTIALS), total


def _fuzz(operation: Any, mode: GenerationMode, credential: str, base_url: str, statuses: Counter[int]) -> str | None:
    @given(operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=RANDOM is None, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: Any) -> None:
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {CREDENTIALS[credential]}"}
        response = case.call_and_validate(base_url=base_url, checks=CHECKS[mode])
        statuses[response.status_code] += 1

    try:
        run()
    except Unsatisfiable:
        return None  # nothing in this operation can be made invalid (no parameters, no body)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - schemathesis raises groups; every failure is reported together
        return f"{type(exc).__name__}: {str(exc)[:3000]}"
    return None
