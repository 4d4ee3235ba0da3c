"""The runner's lease route answered ahead of the middleware chain
(:mod:`watchkeeper.server.early`): with its outcomes, a runner's every pass is one
request, the queue's traffic over HTTP.

An ordinary lease is a POST from a reporter (or admin) token the token cache holds, to
a valid runner id, with a body that is empty or JSON the documented route's own body
model (:class:`LeaseIn`) accepts. Every other request goes on to the documented route
with its body as it came, so its refusal is that route's: the body model's 422, the
token's 401 or 403. The work and its answer are the documented route's own
(:func:`leased_answer`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from pydantic import ValidationError
from starlette.types import Scope

from watchkeeper.access.tokens import Role
from watchkeeper.server.early import JSON_TYPE, EarlyRoute, Head, NotOrdinary, authorized
from watchkeeper.server.routes_queue import ID_PATTERN, LeaseIn, announcer, leased_answer


class LeaseRoute(EarlyRoute):
    """``POST /api/v1/runners/{runner_id}/lease`` for ordinary leases."""

    def __init__(self, endpoint: Callable[..., Any]) -> None:
        super().__init__(endpoint, "/api/v1/runners/{runner_id}/lease", {"runner_id": ID_PATTERN})

    def ordinary(
        self, scope: Scope, head: Head, params: dict[str, str], body: bytes
    ) -> Callable[[], dict[str, Any]]:
        """The pass (outcomes recorded, tasks leased), when the request is an ordinary lease:
        its body empty or one the documented route's body model accepts."""
        authorized(scope, head, Role.REPORTER)
        app = scope["app"]
        return partial(
            leased_answer,
            app.state.services.queue,
            params["runner_id"],
            _lease_in(head.content_type, body),
            announcer(app),
        )

    def answer(self, result: Any) -> Any:
        """The documented route's answer, already JSON values."""
        return result


def _lease_in(content_type: bytes | None, body: bytes) -> LeaseIn:
    """The body of an empty request or a JSON one the body model accepts."""
    if not body:
        return LeaseIn()
    if content_type is None or content_type.lower() != JSON_TYPE:
        raise NotOrdinary
    # Parsed and validated as FastAPI does for the documented route (the standard
    # library's parser, then the model on Python values), so both accept the same bodies.
    try:
        return LeaseIn.model_validate(json.loads(body))
    except (ValueError, ValidationError):
        raise NotOrdinary from None
