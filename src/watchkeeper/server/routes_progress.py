"""The progress report's own route: most of the API's traffic, answered without FastAPI's
dependency resolution and body model when the request is an ordinary one.

An ordinary report is a POST from a reporter (or admin) token the token cache holds,
with a valid kind and run id and a body that is empty or a JSON object of at most a
plain ``step``. Every other request (a token the cache does not hold, a weaker role
or a task token, no token, an odd content type, any other field or value) goes on to
the documented FastAPI route with its body as it came, so every refusal is the one
that route gives: same status, same error body. What the report does, and the errors
the store raises, are the documented route's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.routing import BaseRoute, Match
from starlette.types import Message, Receive, Scope, Send

from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.config import KIND_NAME_PATTERN
from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.fields import free_text
from watchkeeper.server.routes_runs import run_out
from watchkeeper.server.schemas import RUN_ID_PATTERN, STEP_MAX

_PREFIX = "/api/v1/runs/"
_SUFFIX = "/progress"
#: Set on a request this route passed on, so the router's next pass skips it.
_PASSED_ON = "watchkeeper.progress_passed_on"
_KIND = re.compile(KIND_NAME_PATTERN)
_RUN_ID = re.compile(RUN_ID_PATTERN)
_JSON = b"application/json"


class _NotOrdinary(WatchkeeperError):
    """The request is not an ordinary report: the documented route answers it (never told
    to a caller: it only passes the request on)."""


class ProgressRoute(BaseRoute):
    """``POST /api/v1/runs/{kind}/{run_id}/progress`` for ordinary reports.

    ``endpoint`` is the documented route's function: what this path reaches, for
    anyone asking the router. The process kind's own progress route
    (``/api/v1/runs/process/{run_id}/progress``) is never matched here.
    """

    def __init__(self, endpoint: Callable[..., Any]) -> None:
        self.endpoint = endpoint

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """A full match for a POST to a report's progress path that was not passed on."""
        if scope["type"] != "http" or scope.get("method") != "POST" or _PASSED_ON in scope:
            return Match.NONE, {}
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
            return Match.NONE, {}
        kind, slash, run_id = path[len(_PREFIX) : -len(_SUFFIX)].partition("/")
        if not (kind and slash and run_id) or "/" in run_id or kind == "process":
            return Match.NONE, {}
        return Match.FULL, {
            "endpoint": self.endpoint,
            "path_params": {"kind": kind, "run_id": run_id},
        }

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer an ordinary report here; pass any other request on, body and all."""
        body = await _read_body(scope, receive)
        params = scope["path_params"]
        kind, run_id = params["kind"], params["run_id"]
        authorization, content_type = _headers(scope)
        try:
            _authorized(scope, authorization)
            if not (_KIND.match(kind) and _RUN_ID.match(run_id)):
                raise _NotOrdinary
            step = _plain_step(content_type, body)
        except _NotOrdinary:
            scope[_PASSED_ON] = True
            await scope["router"](scope, _replay(body, receive), send)
            return
        reports = scope["app"].state.services.reports
        run = await run_in_threadpool(reports.progress, kind, run_id, step, None)
        await run_out(run)(scope, receive, send)


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole body, failing as the documented route fails on a body it cannot read."""
    try:
        return await Request(scope, receive).body()
    except HTTPException:
        raise
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def _headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """The request's ``Authorization`` and ``Content-Type`` (the first of each, as Starlette)."""
    authorization = content_type = None
    for name, value in scope["headers"]:
        if name == b"authorization" and authorization is None:
            authorization = value
        elif name == b"content-type" and content_type is None:
            content_type = value
    return authorization, content_type


def _authorized(scope: Scope, authorization: bytes | None) -> None:
    """A reporter's token the cache holds, or :class:`_NotOrdinary`."""
    if authorization is None:
        raise _NotOrdinary
    scheme, _, secret = authorization.decode("latin-1").partition(" ")
    secret = secret.strip()
    if not secret or scheme.lower() != "bearer":
        raise _NotOrdinary
    hit, token = scope["app"].state.services.tokens.cached(secret)
    if not hit or not isinstance(token, TokenInfo) or not token.role.allows(Role.REPORTER):
        raise _NotOrdinary


def _plain_step(content_type: bytes | None, body: bytes) -> str | None:
    """The step of an empty body or a JSON object holding at most a plain ``step``."""
    if not body:
        return None
    if content_type is None or content_type.lower() != _JSON:
        raise _NotOrdinary
    try:
        value = json.loads(body)
    except ValueError:
        raise _NotOrdinary from None
    if value is None:
        return None
    if not isinstance(value, dict) or not value.keys() <= {"step"}:
        raise _NotOrdinary
    step = value.get("step")
    if step is None:
        return None
    if type(step) is not str or len(step) > STEP_MAX:
        raise _NotOrdinary
    try:
        return free_text(step)
    except ValueError:
        raise _NotOrdinary from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given again first."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
