"""The health answer over HTTP: ``health_payload`` and a tiny in-process server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from watchkeeper.supervise.health import HealthMonitor, HealthStatus

logger = logging.getLogger(__name__)

HEALTH_PATHS = frozenset({"/", "/health", "/healthz"})
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def health_payload(monitor: HealthMonitor) -> tuple[int, dict[str, object]]:
    """``(status_code, body)``: 200 when healthy or degraded, 503 when unhealthy.

    The main server mounts the same answer on ``/healthz``.
    """
    report = monitor.report()
    code = 503 if report.status is HealthStatus.UNHEALTHY else 200
    body: dict[str, object] = {
        "status": report.status.value,
        "flag": {"healthy": report.flag_healthy, "reason": report.flag_reason},
        "checks": {
            c.name: {
                "status": c.status.value,
                "last": c.last.status.value,
                "detail": c.last.detail,
                "consecutive_failures": c.consecutive_failures,
                "critical": c.critical,
                "data": dict(c.last.data),
            }
            for c in report.checks
        },
    }
    return code, body


class HealthServer:
    """A running health endpoint; ``port`` is the bound port (useful with port 0)."""

    def __init__(self, server: asyncio.Server, monitor: HealthMonitor) -> None:
        self._server = server
        self.monitor = monitor
        sock = server.sockets[0].getsockname()
        self.host: str = sock[0]
        self.port: int = sock[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/healthz"

    async def close(self) -> None:
        """Stop listening and wait for open connections to end."""
        self._server.close()
        await self._server.wait_closed()


async def serve_health(
    monitor: HealthMonitor, port: int = 0, host: str = "127.0.0.1"
) -> HealthServer:
    """Serve ``GET /healthz`` (and ``/``, ``/health``) as JSON on ``host:port``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _answer(monitor, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            logger.info("health request dropped: %r", exc, extra={"action": "serve_health"})
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, host, port, limit=16384)
    return HealthServer(server, monitor)


async def _skip_headers(reader: asyncio.StreamReader) -> None:
    """Read up to the blank line: headers carry nothing the health answer depends on."""
    line = await reader.readuntil(b"\r\n")
    while line != b"\r\n":
        line = await reader.readuntil(b"\r\n")


async def _answer(
    monitor: HealthMonitor, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    request_line = (await reader.readuntil(b"\r\n")).decode("latin-1").split()
    await _skip_headers(reader)
    method, target = [*request_line, "", ""][:2]
    path = target.split("?", 1)[0]
    body: dict[str, object]
    if method not in ("GET", "HEAD"):
        code, body = 405, {"error": "only GET and HEAD"}
    elif path not in HEALTH_PATHS:
        code, body = 404, {"error": f"no such path {path!r}; try /healthz"}
    else:
        code, body = health_payload(monitor)
    payload = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {code} {_REASONS[code]}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n"
        "Cache-Control: no-store\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    writer.write(head if method == "HEAD" else head + payload)
    await writer.drain()
