"""The progress report's own route: most of the API's traffic, answered ahead of the
middleware chain and without FastAPI's dependency resolution and body model when the
request is an ordinary one (:mod:`watchkeeper.server.early`).

An ordinary report is a POST from a reporter (or admin) token the token cache holds,
with a valid kind and run id and a body that is empty or a JSON object of at most a
plain ``step``. Every other request (a token the cache does not hold, a weaker role
or a task token, no token, an odd content type, any other field or value) goes on to
the documented FastAPI route with its body as it came.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.types import Scope

from watchkeeper.access.tokens import Role
from watchkeeper.config import KIND_NAME_PATTERN
from watchkeeper.server.early import EarlyRoute, Head, NotOrdinary, authorized, json_body
from watchkeeper.server.fields import free_text
from watchkeeper.server.routes_runs import run_json
from watchkeeper.server.schemas import RUN_ID_PATTERN, STEP_MAX
from watchkeeper.watch.reports import PushRun


class ProgressRoute(EarlyRoute):
    """``POST /api/v1/runs/{kind}/{run_id}/progress`` for ordinary reports.

    The process kind's own progress route (``/api/v1/runs/process/{run_id}/progress``)
    is never matched here.
    """

    def __init__(self, endpoint: Callable[..., Any]) -> None:
        super().__init__(
            endpoint,
            "/api/v1/runs/{kind}/{run_id}/progress",
            {"kind": KIND_NAME_PATTERN, "run_id": RUN_ID_PATTERN},
        )

    def path_params(self, path: str) -> dict[str, str] | None:
        """The kind and run id of a report's progress path, other than the process kind's."""
        params = super().path_params(path)
        if params is None or params["kind"] == "process":
            return None
        return params

    def ordinary(
        self, scope: Scope, head: Head, params: dict[str, str], body: bytes
    ) -> Callable[[], PushRun]:
        """The report's write, when the request is an ordinary report."""
        authorized(scope, head, Role.REPORTER)
        step = json_body(head.content_type, body, _plain_step)
        reports = scope["app"].state.services.reports
        return partial(reports.progress, params["kind"], params["run_id"], step, None)

    def answer(self, result: Any) -> Any:
        """The run, as the documented route answers it."""
        return run_json(result)


def _plain_step(value: Any) -> str | None:
    """The step of a JSON object holding at most a plain ``step`` (none in ``null``)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value.keys() <= {"step"}:
        raise NotOrdinary
    step = value.get("step")
    if step is None:
        return None
    if type(step) is not str or len(step) > STEP_MAX:
        raise NotOrdinary
    return free_text(step)  # a text it refuses is not ordinary (ValueError)
