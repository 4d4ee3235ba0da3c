"""Routes answered ahead of the middleware chain: the API's busiest requests, in their
ordinary form, without FastAPI's routing, dependency resolution and body model.

An :class:`EarlyRoute` takes one path. A request to it that is ordinary (a token the
token cache holds with the route's role, a valid path and a small body the route's own
rules accept) is answered here; every other request (an unknown or weaker token, an odd
content type, a body that fails validation, a chunked or large one) goes on to the
documented FastAPI route with its body as it came, so every refusal is the one that
route gives: same status, same error body. What the work does, and the errors the store
raises, are the documented route's own: they are answered by the app's handlers.

The chain (error pages, body limit, exception handlers, FastAPI's exit stack, routing
across every router) cost more than the work itself for the smallest requests; it does
nothing for one whose small body has a declared length. The blocking work runs on a
pool of threads of this module's own (:class:`Hop`), which wakes the event loop once for
all the calls that end together (a group commit ends many at once), where the shared
thread pool woke it once for each; the answer is serialised as ``JSONResponse`` does,
without building one.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import queue
import re
import threading
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import FastAPI, HTTPException
from starlette.requests import Request
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from watchkeeper.access.tokens import Role, TokenInfo
from watchkeeper.errors import WatchkeeperError

T = TypeVar("T")

#: Set on a request an early route passed on, so the router's next pass skips it.
PASSED_ON = "watchkeeper.early_passed_on"
JSON_TYPE = b"application/json"
#: Largest declared body taken ahead of the middleware chain: far below the body limit,
#: which therefore never applies to one taken here.
EARLY_BODY_MAX = 16 * 1024
#: Threads doing early work at once: as many calls as this can share one group commit.
THREADS = 64
#: A working thread idle this long ends (one is started again when requests come).
IDLE_S = 10.0


class NotOrdinary(WatchkeeperError):
    """The request is not an ordinary one: the documented route answers it (never told to
    a caller: the request is only passed on)."""


@dataclass(frozen=True, slots=True)
class Head:
    """What an early route reads of a request's headers: the first ``Authorization`` and
    ``Content-Type`` (as Starlette takes them) and the declared body length."""

    authorization: bytes | None
    content_type: bytes | None
    length: int | None


class EarlyRoute(BaseRoute):
    """A ``POST`` route whose ordinary requests are answered here.

    ``endpoint`` is the documented route's function: what the path reaches, for anyone
    asking the router. ``template`` is the documented route's path, its parameters
    written ``{name}``, each one whole path segment; ``patterns`` holds, for each
    parameter, the pattern the whole value must match: a path with any
    other value is not taken here, so the documented route refuses it as it came.
    A subclass says what makes a request ordinary and what work it does
    (:meth:`ordinary`), and what the work's result answers (:meth:`answer`).
    """

    def __init__(
        self, endpoint: Callable[..., Any], template: str, patterns: Mapping[str, str]
    ) -> None:
        self.endpoint = endpoint
        self.template = template
        # One whole segment per parameter, as the documented route's converter takes it.
        pieces = re.split(r"\{(\w+)\}", template)
        names = pieces[1::2]
        if sorted(names) != sorted(patterns):
            raise ValueError(f"{template}: a pattern for each parameter, and only those")
        self._path = re.compile(
            "".join(
                re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>[^/]+)"
                for i, piece in enumerate(pieces)
            )
        )
        self._patterns = {name: re.compile(patterns[name]) for name in names}

    def path_params(self, path: str) -> dict[str, str] | None:
        """The path's parameters when this route takes ``path``; None when it does not."""
        found = self._path.fullmatch(path)
        if found is None:
            return None
        params = found.groupdict()
        for name, pattern in self._patterns.items():
            # Whole values only: ``$`` would let a trailing newline through, where the
            # documented route's validator refuses it.
            if not pattern.fullmatch(params[name]):
                return None
        return params

    @abstractmethod
    def ordinary(
        self, scope: Scope, head: Head, params: dict[str, str], body: bytes
    ) -> Callable[[], Any]:
        """The blocking work of an ordinary request, or :class:`NotOrdinary`."""

    @abstractmethod
    def answer(self, result: Any) -> Any:
        """The JSON value answering the work's ``result`` (status 200)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """A full match for a POST to this route's path that was not passed on."""
        if scope["type"] != "http" or scope.get("method") != "POST" or PASSED_ON in scope:
            return Match.NONE, {}
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        params = self.path_params(path)
        if params is None:
            return Match.NONE, {}
        return Match.FULL, {"endpoint": self.endpoint, "path_params": params}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer an ordinary request here; pass any other request on, body and all (the
        router reached this route inside the chain: failures go to its handlers)."""
        body = await _read_body(scope, receive)
        try:
            work = self.ordinary(scope, headers_of(scope), scope["path_params"], body)
        except NotOrdinary:
            scope[PASSED_ON] = True
            replayed = [{"type": "http.request", "body": body, "more_body": False}]
            await scope["router"](scope, replay(replayed, receive), send)
            return
        await send_json(send, self.answer(await HOP.call(work)))


class EarlyFastAPI(FastAPI):
    """A FastAPI app whose leading :class:`EarlyRoute` routes answer their ordinary
    requests ahead of its middleware stack; every other request goes to the stack as it
    came."""

    def build_middleware_stack(self) -> ASGIApp:
        """The stack FastAPI builds, behind the early routes."""
        return _AheadOfMiddleware(super().build_middleware_stack(), self.router)


class _AheadOfMiddleware:
    """Takes ordinary requests before the middleware chain (``app``); sends the rest on."""

    def __init__(self, app: ASGIApp, router: Router) -> None:
        self.app = app
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        taken = self._route_for(scope)
        if taken is None:
            await self.app(scope, receive, send)
            return
        route, params = taken
        head = headers_of(scope)
        if head.length is None or head.length > EARLY_BODY_MAX:
            # A body the chain must measure and read: it goes as it came.
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
        try:
            work = route.ordinary(scope, head, params, body)
        except NotOrdinary:
            await self._pass_on(scope, read, receive, send)
            return
        try:
            answer = route.answer(await HOP.call(work))
        except Exception as exc:  # noqa: BLE001 - answered by the app's handler, as in the chain
            await _answer_failure(scope, receive, send, exc)
            return
        await send_json(send, answer)

    def _route_for(self, scope: Scope) -> tuple[EarlyRoute, dict[str, str]] | None:
        for route in self.router.routes:
            if not isinstance(route, EarlyRoute):
                return None
            match, child = route.matches(scope)
            if match is Match.FULL:
                return route, child["path_params"]
        return None

    async def _pass_on(
        self, scope: Scope, read: list[Message], receive: Receive, send: Send
    ) -> None:
        scope[PASSED_ON] = True
        await self.app(scope, replay(read, receive), send)


async def send_json(send: Send, value: Any) -> None:
    """Answer 200 with ``value`` as ``JSONResponse(value)`` answers it, byte for byte."""
    body = json.dumps(
        value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")
    headers = [(b"content-length", b"%d" % len(body)), (b"content-type", JSON_TYPE)]
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


def headers_of(scope: Scope) -> Head:
    """The request's :class:`Head`; its length is None when the body is chunked, and over
    :data:`EARLY_BODY_MAX` when it is not a plain number."""
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
    return Head(authorization, content_type, None if chunked else length)


def authorized(scope: Scope, head: Head, role: Role) -> TokenInfo:
    """A token the cache holds whose role allows ``role``, or :class:`NotOrdinary`."""
    if head.authorization is None:
        raise NotOrdinary
    scheme, _, secret = head.authorization.decode("latin-1").partition(" ")
    secret = secret.strip()
    if not secret or scheme.lower() != "bearer":
        raise NotOrdinary
    hit, token = scope["app"].state.services.tokens.cached(secret)
    if not hit or not isinstance(token, TokenInfo) or not token.role.allows(role):
        raise NotOrdinary
    return token


def json_body(content_type: bytes | None, body: bytes, read: Callable[[Any], T]) -> T | None:
    """What an ordinary request's body holds: None when it is empty; else ``read`` of its
    JSON value, or :class:`NotOrdinary`.

    The body must be declared plain ``application/json`` and is parsed as FastAPI parses
    the documented route's (the standard library's parser, then the rules on Python
    values), so both take the same bodies. ``read`` refuses a value with
    :class:`NotOrdinary` or :class:`ValueError` (pydantic's ``ValidationError`` is one).
    """
    if not body:
        return None
    if content_type is None or content_type.lower() != JSON_TYPE:
        raise NotOrdinary
    try:
        return read(json.loads(body))
    except (ValueError, RecursionError):  # too deeply nested for the parser: not ordinary
        raise NotOrdinary from None


def replay(messages: Sequence[Message], receive: Receive) -> Receive:
    """``receive`` with the messages already read given again first."""
    left = list(messages)

    async def replayed() -> Message:
        if left:
            return left.pop(0)
        return await receive()

    return replayed


# -- the hop to a working thread ------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Call(Generic[T]):
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    context: contextvars.Context
    function: Callable[..., T]
    args: tuple[Any, ...]


class Hop:
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
            threading.Thread(target=self._work, name="early-worker", daemon=True).start()
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


HOP = Hop(THREADS, IDLE_S)
