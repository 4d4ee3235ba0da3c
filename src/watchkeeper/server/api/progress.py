"""The progress report's own route: most of the API's traffic, answered ahead of the
middleware chain and without FastAPI's dependency resolution and body model when the
request is an ordinary one (:mod:`watchkeeper.server.early.asgi`).

An ordinary report is a POST from a reporter (or admin) token the token cache holds,
with a valid kind and run id and a body that is empty or a JSON object of at most a
plain ``step``, whole counters ``done`` and ``total`` and the step's ``budget_s`` and
``expected_s``, each within the documented route's limits. Every other request (a
token the cache does not hold, a weaker role or a task token, no token, an odd content
type, any other field or value) goes on to the documented FastAPI route with its body
as it came.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.types import Scope

from watchkeeper.access.tokens import Role
from watchkeeper.config import KIND_NAME_PATTERN
from watchkeeper.server.api.fields import free_text
from watchkeeper.server.api.runs import run_json
from watchkeeper.server.api.schemas import (
    BUDGET_MAX_S,
    COUNTER_MAX,
    EXPECTED_MAX_S,
    RUN_ID_PATTERN,
    STEP_MAX,
)
from watchkeeper.server.early.asgi import EarlyRoute, Head, NotOrdinary, authorized, json_body
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
        said = json_body(head.content_type, body, _plain_report)
        reports = scope["app"].state.services.reports
        if said is None:
            return partial(reports.progress, params["kind"], params["run_id"], None, None)
        step = said.pop("step", None)
        return partial(reports.progress, params["kind"], params["run_id"], step, None, **said)

    def answer(self, result: Any) -> Any:
        """The run, as the documented route answers it."""
        return run_json(result)


#: Each number a report may carry, with the bounds the documented route holds it to: whole
#: or not, the least (and whether it may equal it) and the most.
_NUMBERS: dict[str, tuple[bool, float, bool, float]] = {
    "done": (True, 0, True, COUNTER_MAX),
    "total": (True, 0, True, COUNTER_MAX),
    "budget_s": (False, 0, False, BUDGET_MAX_S),
    "expected_s": (False, 0, False, EXPECTED_MAX_S),
}
_FIELDS = frozenset({"step", *_NUMBERS})


def _plain_report(value: Any) -> dict[str, Any] | None:
    """What a JSON object holding at most a plain ``step`` and numbers within their bounds
    says, without its ``null`` values (``None``: the body is ``null``)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value.keys() <= _FIELDS:
        raise NotOrdinary
    said: dict[str, Any] = {}
    for name, given in value.items():
        if given is None:
            continue
        if name == "step":
            if type(given) is not str or len(given) > STEP_MAX:
                raise NotOrdinary
            said["step"] = free_text(given)  # a text it refuses is not ordinary (ValueError)
            continue
        whole, least, inclusive, most = _NUMBERS[name]
        # A JSON number as it came: true, a fraction for a count or one out of bounds goes
        # on to the documented route, which refuses it in its own words.
        if type(given) is not int and (whole or type(given) is not float):
            raise NotOrdinary
        if not (given >= least if inclusive else given > least) or given > most:
            raise NotOrdinary
        said[name] = given
    return said
