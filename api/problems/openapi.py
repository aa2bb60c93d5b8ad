"""The OpenAPI extras: the problem+json answers a route declares, and the usual sets of them."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from api.problems.model import MEDIA_TYPE, status_title


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each status answered as problem+json."""
    schema = {"$ref": "#/components/schemas/Problem"}
    if 401 in statuses:  # a keyed route: its key may be over the rate limit (api.limits)
        statuses = (*statuses, 429)
    return {
        s: {"description": status_title(s), "content": {MEDIA_TYPE: {"schema": schema}}}
        for s in sorted(set(statuses))
    }


READS = problem_responses(401, 404, 422, 503)
"""A read of one user's resource: no key, no such thing, a bad id, the database away."""
WRITES = problem_responses(400, 401, 404, 413, 415, 422, 503)
"""A write with a JSON body: READS and a body that is not JSON, not said to be, or too large."""
NO_CONTENT: dict[str, Any] = {
    "status_code": 204,
    "response_class": Response,
    "responses": READS,
}
"""A DELETE answered 204 with no body (its route adds the summary)."""
