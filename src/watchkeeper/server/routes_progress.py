"""The progress report's own route: most of the API's traffic, answered without FastAPI's
dependency resolution and body model when the request is an ordinary one.

An ordinary report is a POST from a reporter (or admin) token the token cache holds,
with a valid kind and run id and a body that is empty or a JSON object of at most a
plain ``step``. Every other request (a token the cache does not hold, a weaker role
or a task token, no token, an odd content type, any other field or value) goes on to
the documented FastAPI route with its body as it came, so every refusal is the one
that route gives: same status, same error body. What the report does, and the errors
the store raises, are the documented route's own.

Ordinary reports are taken ahead of the middleware chain (:func:`ahead_of_middleware`):
the chain (error pages, body limit, exception handlers, FastAPI's exit stack) cost
30-40 µs a report and does nothing for one whose small body has a declared length;
any other request goes through the chain as before. The blocking write runs on a
pool of threads of this module's own (:class:`_Hop`), which wakes the event loop
once for all the reports a group commit ends together, where the shared thread
pool woke it once for each; the answer is serialised as ``JSONResponse`` does,
without building one.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import queue
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.config import KIND_NAME_PATTERN
from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.fields import free_text
from watchkeeper.server.routes_runs import run_json
from watchkeeper.server.schemas import RUN_ID_PATTERN, STEP_MAX
from watchkeeper.watch.reports import PushRun

T = TypeVar("T")

_PREFIX = "/api/v1/runs/"
_SUFFIX = "/progress"
#: Set on a request this route passed on, so the router's next pass skips it.
_PASSED_ON = "watchkeeper.progress_passed_on"
_KIND = re.compile(KIND_NAME_PATTERN)
_RUN_ID = re.compile(RUN_ID_PATTERN)
_JSON = b"application/json"
#: Largest declared body taken ahead of the middleware chain: a longest step, each character
#: escaped, fits; far below the body limit, which therefore never applies to one taken here.
EARLY_BODY_MAX = 16 * 1024
#: Threads writing reports at once: as many reports as this can share one group commit.
THREADS = 64
#: A writing thread idle this long ends (one is started again when reports come).
IDLE_S = 10.0


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
        authorization, content_type, _ = _headers(scope)
        try:
            step = _ordinary(scope, authorization, content_type, kind, run_id, body)
        except _NotOrdinary:
            scope[_PASSED_ON] = True
            replayed = [{"type": "http.request", "body": body, "more_body": False}]
            await scope["router"](scope, _replay(replayed, receive), send)
            return
        # Failures go to the middleware chain's handlers, as the documented route's do.
        await _answer(send, await _progress(scope, kind, run_id, step))


def ahead_of_middleware(build: Callable[[], ASGIApp], router: Router) -> Callable[[], ASGIApp]:
    """Wrap an app's ``build_middleware_stack``: the stack it builds, with ordinary reports
    answered ahead of it by the router's :class:`ProgressRoute` (while that is its first
    route), every other request passed to the stack as it came."""

    def built() -> ASGIApp:
        return _AheadOfMiddleware(build(), router)

    return built


class _AheadOfMiddleware:
    """Takes ordinary reports before the middleware chain (``app``); sends the rest on."""

    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        routes = self.router.routes
        route = routes[0] if routes else None
        if not isinstance(route, ProgressRoute):
            await self.app(scope, receive, send)
            return
        match, child = route.matches(scope)
        authorization, content_type, length = _headers(scope) if match is Match.FULL else _NONE
        if length is None or length > EARLY_BODY_MAX:
            # No report, or a body the chain must measure and read: it goes as it came.
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        body = b""
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":  # the client left: the chain tells why
                await self._pass_on(scope, read, receive, send)
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        kind, run_id = child["path_params"]["kind"], child["path_params"]["run_id"]
        try:
            step = _ordinary(scope, authorization, content_type, kind, run_id, body)
        except _NotOrdinary:
            await self._pass_on(scope, read, receive, send)
            return
        try:
            run = await _progress(scope, kind, run_id, step)
        except Exception as exc:  # noqa: BLE001 - answered by the app's handler, as in the chain
            await _answer_failure(scope, receive, send, exc)
            return
        await _answer(send, run)

    async def _pass_on(
        self, scope: Scope, read: list[Message], receive: Receive, send: Send
    ) -> None:
        scope[_PASSED_ON] = True
        await self.app(scope, _replay(read, receive), send)


_NONE: tuple[None, None, None] = (None, None, None)


async def _progress(scope: Scope, kind: str, run_id: str, step: str | None) -> PushRun:
    """The report, recorded (answered after the commit holding it)."""
    reports = scope["app"].state.services.reports
    return await _HOP.call(reports.progress, kind, run_id, step, None)


async def _answer(send: Send, run: PushRun) -> None:
    """The run as ``JSONResponse(run_json(run))`` answers it, byte for byte."""
    body = json.dumps(
        run_json(run), ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", _JSON)]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _answer_failure(scope: Scope, receive: Receive, send: Send, exc: Exception) -> None:
    """Answer ``exc`` with the app's handler for it, as the middleware chain would: a failure
    no handler but the catch-all's is for is answered by that one and raised again."""
    handlers = scope["app"].exception_handlers
    for cls in type(exc).__mro__:
        handler = handlers.get(cls)
        if handler is not None:
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)
            if cls is Exception:
                raise exc
            return
    raise exc


async def _read_body(scope: Scope, receive: Receive) -> bytes:
    """The whole body, failing as the documented route fails on a body it cannot read."""
    try:
        return await Request(scope, receive).body()
    except HTTPException:
        raise
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def _headers(scope: Scope) -> tuple[bytes | None, bytes | None, int | None]:
    """The request's ``Authorization`` and ``Content-Type`` (the first of each, as Starlette),
    and its declared length when that is a plain number and the body is not chunked."""
    authorization = content_type = None
    length: int | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"authorization":
            if authorization is None:
                authorization = value
        elif name == b"content-type":
            if content_type is None:
                content_type = value
        elif name == b"content-length":
            length = int(value) if value.isdigit() and len(value) <= 9 else EARLY_BODY_MAX + 1
        elif name == b"transfer-encoding":
            chunked = True
    return authorization, content_type, None if chunked else length


def _ordinary(
    scope: Scope,
    authorization: bytes | None,
    content_type: bytes | None,
    kind: str,
    run_id: str,
    body: bytes,
) -> str | None:
    """The step of an ordinary report, or :class:`_NotOrdinary`."""
    _authorized(scope, authorization)
    if not (_KIND.match(kind) and _RUN_ID.match(run_id)):
        raise _NotOrdinary
    return _plain_step(content_type, body)


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


def _replay(messages: Sequence[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already read given again first."""
    left = list(messages)

    async def replayed() -> Message:
        if left:
            return left.pop(0)
        return await receive()

    return replayed


# -- the hop to a writing thread ------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Call(Generic[T]):
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    context: contextvars.Context
    function: Callable[..., T]
    args: tuple[Any, ...]


class _Hop:
    """Runs blocking calls on threads of its own, each in a copy of its caller's context.

    Calls that end together (a group commit answers many at once) wake their event
    loop once: the first to end schedules the settling of all that ended before the
    loop gets to it. Threads start when every one is busy, up to ``most``, and end
    after ``idle_s`` without work.
    """

    def __init__(self, most: int, idle_s: float) -> None:
        self.most = most
        self.idle_s = idle_s
        self._calls: queue.SimpleQueue[_Call[Any]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for a call (or about to)
        self._waiting = 0  # calls no thread has taken yet
        self._ended: dict[asyncio.AbstractEventLoop, list[tuple[_Call[Any], Any, Any]]] = {}

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` on a thread of the pool; its result or its exception."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._waiting += 1
            start = self._waiting > self._idle and self._threads < self.most
            if start:
                self._threads += 1
                self._idle += 1
        if start:
            threading.Thread(target=self._work, name="progress-writer", daemon=True).start()
        self._calls.put(_Call(loop, future, contextvars.copy_context(), function, args))
        return await future

    def _work(self) -> None:
        while True:
            try:
                call = self._calls.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if self._waiting < self._idle:  # the others can take what still comes
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            with self._lock:
                self._waiting -= 1
                self._idle -= 1
            result = error = None
            try:
                result = call.context.run(call.function, *call.args)
            except BaseException as exc:  # noqa: BLE001 - the caller gets it, as it would
                error = exc
            with self._lock:
                self._idle += 1
                ended = self._ended.setdefault(call.loop, [])
                ended.append((call, result, error))
                wake = len(ended) == 1
            if wake:
                try:
                    call.loop.call_soon_threadsafe(self._settle, call.loop)
                except RuntimeError:  # the loop closed: nobody is left to answer
                    with self._lock:
                        self._ended.pop(call.loop, None)

    def _settle(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            ended = self._ended.pop(loop, [])
        for call, result, error in ended:
            if call.future.done():  # the request was cancelled meanwhile
                continue
            if error is None:
                call.future.set_result(result)
            else:
                call.future.set_exception(error)


_HOP = _Hop(THREADS, IDLE_S)
