"""The runner's lease route answered ahead of the middleware chain
(:mod:`watchkeeper.server.early.asgi`): with its outcomes, a runner's every pass is one
request, the queue's traffic over HTTP.

An ordinary lease is a POST from a reporter (or admin) token the token cache holds, to
a valid runner id, with a body that is empty or JSON the documented route's own body
model (:class:`LeaseIn`) accepts. Every other request goes on to the documented route
with its body as it came, so its refusal is that route's: the body model's 422, the
token's 401 or 403. The work and its answer are the documented route's own
(:func:`leased_answer`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.types import Scope

from watchkeeper.access.tokens import Role
from watchkeeper.server.api.queue import announcer, leased_answer
from watchkeeper.server.api.queue_bodies import ID_PATTERN, LeaseIn
from watchkeeper.server.early.asgi import EarlyRoute, Head, authorized, json_body


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
            json_body(head.content_type, body, LeaseIn.model_validate) or LeaseIn(),
            announcer(app),
        )

    def answer(self, result: Any) -> Any:
        """The documented route's answer, already JSON values."""
        return result
