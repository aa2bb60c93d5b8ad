"""Property-based fuzzing of tzpush api from its own OpenAPI document (schemathesis).

Every operation the document lists gets generated requests, valid (by the schema) and invalid,
sent to a real ``tzpush api`` process with an ops key. Each answer must not be a 5xx, must use a
status code and a content type the document declares, and must match the declared schema.
Bounded: ``EXAMPLES`` per operation and mode, so the module runs in well under a minute.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.test_api_support import plan_window, prepare

EXAMPLES = int(__import__("os").environ.get("TZPUSH_API_FUZZ_EXAMPLES", "12"))
PROTOCOL_ERROR = "Invalid HTTP request received."
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.mark.parametrize(
    "mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
)
def test_no_input_gives_a_5xx_and_every_answer_matches_the_schema(api, db, mode):
    prepare(db)
    plan_window(api, db)  # changes re-plan their user at once, as with a creator running
    schema = schemathesis.openapi.from_url(api.url + "/openapi.json")
    headers = {"Authorization": f"Bearer {api.ops_key}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    with api.client("ops") as c:  # a user most generated ids will not hit, and one they may
        c.put("/v1/users/a", json={"timezone": "UTC"})
        c.put("/v1/users/a/reminders/a", json={"category": "meal", "label": "x", "at": "08:00"})
    skipped: list[str] = []
    for operation in operations:
        strategy = operation.as_strategy(generation_mode=mode)

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=strategy, _=st.just(operation.label))
        def run(case: schemathesis.Case, _: str) -> None:
            response = case.call(base_url=api.url, headers=headers)
            if response.status_code == 400 and response.text == PROTOCOL_ERROR:
                return  # refused by the HTTP server before the app (a bad Content-Length...)
            case.validate_response(response, checks=CHECKS, headers=headers)

        try:
            run()
        except Unsatisfiable:
            # Nothing of this operation can be made invalid (no parameter, no body): /healthz.
            assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
            skipped.append(operation.label)
    assert len(skipped) <= 4, skipped
    log = api.log_tail(400)
    assert "unhandled error" not in log, log
