"""The one place the HTTP server is configured: uvicorn with limits on slow and idle clients.

Uvicorn closes a connection that stays idle after a response
(``timeout_keep_alive``) but waits forever for a request head: a client that
connects and sends nothing, or trickles a header byte every few seconds, holds
its socket for as long as it likes. The protocol classes here start a timer
when a connection opens (and when the first byte of each later request head
arrives) and close the connection unless the whole head arrived in time, so a
slow trickle is cut as surely as silence. A head may also not grow past
:data:`MAX_HEAD_BYTES`.

Once a head arrived, the handler waits for the body as long as the client
takes: a client that sends a whole head and then trickles (or withholds) its
body would hold the connection, and the handler's task, forever. A second
timer runs from the head to the body's last byte; past
:data:`BODY_TIMEOUT_S` the client is answered ``408`` and the connection closed.

On SIGTERM (or Ctrl-C) uvicorn stops accepting, lets requests in flight
finish and waits for every connection to close before the app's lifespan
ends: an open event stream would hold it for as long as the stream lasts.
:class:`Server` runs its ``on_stop`` callbacks first, so streams end at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

#: Longest a client may take to send a whole request head, from its first byte (or the
#: connection's start), in seconds.
HEADER_TIMEOUT_S = 10.0
#: Longest a request's body may take to arrive whole, from its head, in seconds.
BODY_TIMEOUT_S = 30.0
#: How long an idle connection stays open after a response, in seconds.
KEEP_ALIVE_S = 5
#: Connections the server serves at once; past this it answers 503.
MAX_CONNECTIONS = 1000
#: Largest request head (request line and headers), in bytes.
MAX_HEAD_BYTES = 64 * 1024


class _Connection(Protocol):
    """The parts of uvicorn's HTTP protocol classes the head deadline uses."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    timeout_keep_alive_task: asyncio.TimerHandle | None
    cycle: Any
    flow: Any


class HeadDeadline:
    """Mixed into a uvicorn protocol class: a request head must arrive whole and in time."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    max_head_bytes: int = MAX_HEAD_BYTES
    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes: int = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        waiting = self._between_requests()
        if waiting:
            self._head_bytes += len(data)
        super().data_received(data)  # type: ignore[misc]
        conn: _Connection = self  # type: ignore[assignment]
        serving: object = conn.transport.get_protocol()
        upgraded = serving is not self
        if conn.transport.is_closing() or upgraded:
            self._disarm_head_timer()  # closed, or upgraded to another protocol
        elif not self._between_requests():
            self._disarm_head_timer()  # a head arrived whole: the request is being served
            self._head_bytes = 0
        elif self._head_bytes > self.max_head_bytes:
            log.info("Closing a connection whose request head passed %d bytes", self.max_head_bytes)
            conn.transport.close()
            self._disarm_head_timer()
        elif waiting and conn.timeout_keep_alive_task is None:
            # Part of a head came (uvicorn stopped its idle timer on it): it must end in time.
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _between_requests(self) -> bool:
        conn: _Connection = self  # type: ignore[assignment]
        return conn.cycle is None or bool(conn.cycle.response_complete)

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            conn: _Connection = self  # type: ignore[assignment]
            self._head_timer = conn.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        conn: _Connection = self  # type: ignore[assignment]
        if self._between_requests() and not conn.transport.is_closing():
            log.info(
                "Closing a connection that sent no whole request head in %g s",
                self.header_timeout_s,
            )
            conn.transport.close()


class BodyDeadline:
    """Mixed into a uvicorn protocol class: a request body must arrive whole in time."""

    body_timeout_s: float = BODY_TIMEOUT_S
    _body_timer: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._body_pending():
            if self._body_timer is None:
                conn: _Connection = self  # type: ignore[assignment]
                self._body_timer = conn.loop.call_later(self.body_timeout_s, self._body_too_slow)
        else:
            self._disarm_body_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_body_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _body_pending(self) -> bool:
        """A request is being served whose body has not all arrived."""
        conn: _Connection = self  # type: ignore[assignment]
        cycle = conn.cycle
        if cycle is None or cycle.response_complete or not cycle.more_body:
            return False
        serving: object = conn.transport.get_protocol()
        return serving is self and not conn.transport.is_closing()

    def _disarm_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if not self._body_pending():
            return
        conn: _Connection = self  # type: ignore[assignment]
        if conn.flow.read_paused:
            # The handler has not taken what came yet: the client is not the slow one.
            self._body_timer = conn.loop.call_later(self.body_timeout_s, self._body_too_slow)
            return
        log.info(
            "Closing a connection whose request body did not arrive within %g s",
            self.body_timeout_s,
        )
        if not conn.cycle.response_started:
            conn.transport.write(_timed_out(self.body_timeout_s))
        # The handler waiting for the body is told the client left.
        conn.transport.close()


def _timed_out(timeout_s: float) -> bytes:
    """A whole ``408`` answer in the API's error shape, closing the connection."""
    body = json.dumps(
        {
            "error": {
                "code": "request_timeout",
                "message": (
                    f"the request body did not arrive within {timeout_s:g} s of its head: "
                    "send the whole request at once"
                ),
            }
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class H11WithDeadline(HeadDeadline, BodyDeadline, H11Protocol):
    """uvicorn's pure-Python HTTP/1.1 protocol with the head and body deadlines."""


def _protocol_classes() -> list[type[Any]]:
    classes: list[type[Any]] = []
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional: h11 always works
        pass
    else:

        class HttpToolsWithDeadline(HeadDeadline, BodyDeadline, HttpToolsProtocol):
            """uvicorn's httptools protocol with the head and body deadlines."""

        classes.append(HttpToolsWithDeadline)
    classes.append(H11WithDeadline)
    return classes


#: The protocol classes with the head deadline, fastest first.
PROTOCOLS: list[type[Any]] = _protocol_classes()


def protocol(
    header_timeout_s: float,
    *,
    body_timeout_s: float = BODY_TIMEOUT_S,
    parser: str | None = None,
) -> type[Any]:
    """A protocol class whose connections must send a whole head within ``header_timeout_s``
    and each request's whole body within ``body_timeout_s`` of its head.

    ``parser`` picks ``"httptools"`` or ``"h11"``; by default the fastest installed.
    """
    if header_timeout_s <= 0:
        raise ValueError("the header timeout must be positive")
    if body_timeout_s <= 0:
        raise ValueError("the body timeout must be positive")
    base = PROTOCOLS[0]
    if parser is not None:
        matching = [cls for cls in PROTOCOLS if cls.__name__.lower().startswith(parser)]
        if not matching:
            raise ValueError(f"no HTTP parser {parser!r}: use one of httptools, h11")
        base = matching[0]
    limits = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s}
    return type(base.__name__, (base,), limits)


def server_config(
    app: Any,
    host: str,
    port: int,
    *,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_TIMEOUT_S,
    keep_alive_s: int = KEEP_ALIVE_S,
    max_connections: int = MAX_CONNECTIONS,
    parser: str | None = None,
    **options: Any,
) -> uvicorn.Config:
    """The server's uvicorn configuration for ``app`` on ``host:port``, with its limits.

    ``options`` go to :class:`uvicorn.Config` as they are (``log_level``, ``access_log``...).
    """
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol(header_timeout_s, body_timeout_s=body_timeout_s, parser=parser),
        timeout_keep_alive=keep_alive_s,
        limit_concurrency=max_connections,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        **options,
    )


class Server(uvicorn.Server):
    """uvicorn's server that calls ``on_stop`` (on the event loop) as soon as it stops,
    before it waits for open connections: the hook that ends held streams."""

    def __init__(
        self,
        config: uvicorn.Config,
        on_stop: Sequence[Callable[[], None]] = (),
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(config)
        self._on_stop = list(on_stop)
        self._stop_requested = stop_requested

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's own signal handling, which also honours a stop asked for before it began
        (``stop_requested``): the server then stops as soon as it has started."""
        with super().capture_signals():
            if self._stop_requested():
                self.should_exit = True
            yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Run the ``on_stop`` callbacks, then uvicorn's graceful shutdown."""
        for callback in self._on_stop:
            try:
                callback()
            except Exception:  # one failed hook must not keep the server from stopping
                log.exception("A shutdown hook failed")
        await super().shutdown(sockets)
