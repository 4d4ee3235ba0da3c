"""One kept-alive HTTP/1.1 connection carrying one JSON call at a time: a chat channel's lane.

A card is one small JSON POST and one small JSON answer. Through the general
HTTP client that cost about 0.6 ms of CPU per call (building and merging the
request's models, cookies, the pool's checks of its connection); written
straight to an asyncio stream it costs a tenth of that. Failures are raised as
the general client's errors, so they are classified the same way: nothing was
sent when the connection could not be made; anything later may have been sent.

Only what the platforms' APIs need is spoken: ``Content-Length`` or chunked
answers, or an answer read to the connection's end; a connection the server
closed, or one whose answer was not read whole, is never used again.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

import httpx

#: Longest head (status line and headers) an answer may have.
HEAD_LIMIT = 64 * 1024
_NO_BODY = frozenset({204, 304})


class Lane:
    """A connection of its own for one call at a time (see the module's text).

    ``timeout_s`` bounds the connection's making, the request's writing and
    the answer's reading, each; ``tls`` is used for ``https`` addresses.
    """

    def __init__(self, timeout_s: float, tls: ssl.SSLContext) -> None:
        self.timeout_s = timeout_s
        self.tls = tls
        self._origin: tuple[str, str, int] | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._parsed: dict[str, tuple[tuple[str, str, int], str, str]] = {}

    async def request(
        self, method: str, url: str, body: Any, headers: dict[str, str] | None = None
    ) -> httpx.Response:
        """Send ``body`` as JSON and read the whole answer; raises ``httpx.HTTPError``."""
        origin, host, target = self._parse(url)
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        raw = content.encode()
        lines = [
            f"{method} {target} HTTP/1.1",
            f"Host: {host}",
            "Accept: */*",
            "User-Agent: watchkeeper",
            "Content-Type: application/json",
            f"Content-Length: {len(raw)}",
        ]
        for name, value in (headers or {}).items():
            if any(c in name or c in value for c in "\r\n\0"):
                raise httpx.LocalProtocolError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", errors="strict")
        reader, writer = await self._connection(origin)
        try:
            writer.write(head + raw)
            try:
                async with asyncio.timeout(self.timeout_s):
                    await writer.drain()
            except TimeoutError as exc:
                raise httpx.WriteTimeout("the request could not be written in time") from exc
            except OSError as exc:
                raise httpx.WriteError(f"writing the request: {exc}") from exc
            try:
                async with asyncio.timeout(self.timeout_s):
                    status, fields, answer, keep = await _answer(reader, method)
            except TimeoutError as exc:
                raise httpx.ReadTimeout("no answer in time") from exc
            except (OSError, asyncio.IncompleteReadError) as exc:
                raise httpx.ReadError(f"reading the answer: {exc!r}") from exc
            except (asyncio.LimitOverrunError, ValueError) as exc:
                raise httpx.RemoteProtocolError(f"an answer not understood: {exc}") from exc
        except BaseException:
            self.close()  # what is left on it is not known: never used again
            raise
        if not keep:
            self.close()
        return httpx.Response(status, headers=fields, content=answer)

    def _parse(self, url: str) -> tuple[tuple[str, str, int], str, str]:
        found = self._parsed.get(url)
        if found is None:
            parts = urlsplit(url)
            if parts.scheme not in {"http", "https"} or not parts.hostname:
                raise httpx.UnsupportedProtocol(f"not an http(s) address: {url[:80]}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            found = ((parts.scheme, parts.hostname, port), parts.netloc.rpartition("@")[2], target)
            if len(self._parsed) < 64:  # a channel calls a handful of addresses
                self._parsed[url] = found
        return found

    async def _connection(
        self, origin: tuple[str, str, int]
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = self._reader, self._writer
        # A connection the server closed while idle is seen at its end: a new one is made.
        if (
            reader is not None
            and writer is not None
            and self._origin == origin
            and not reader.at_eof()
            and not writer.is_closing()
        ):
            return reader, writer
        self.close()
        scheme, host, port = origin
        tls = self.tls if scheme == "https" else None
        try:
            async with asyncio.timeout(self.timeout_s):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None, limit=HEAD_LIMIT
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} in time") from exc
        except OSError as exc:  # refused, unreachable, a name not found, a TLS handshake refused
            raise httpx.ConnectError(f"no connection to {host}:{port}: {exc}") from exc
        self._origin, self._reader, self._writer = origin, reader, writer
        return reader, writer

    def close(self) -> None:
        """Drop the connection (the next call makes a new one)."""
        writer, self._reader, self._writer, self._origin = self._writer, None, None, None
        if writer is not None:
            writer.close()


async def _answer(
    reader: asyncio.StreamReader, method: str
) -> tuple[int, list[tuple[str, str]], bytes, bool]:
    """Status, headers, body, and whether the connection may carry another call."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *rest = head[:-4].decode("latin-1").split("\r\n")
        version, _, tail = status_line.partition(" ")
        status = int(tail[:3])
        if not version.startswith("HTTP/1.") or not 100 <= status < 600:
            raise ValueError(f"status line {status_line[:80]!r}")
        if status >= 200 or status == 101:
            break  # an interim answer (100 Continue) is followed by the real one
    fields: list[tuple[str, str]] = []
    for line in rest:
        name, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"header line {line[:80]!r}")
        fields.append((name.strip(), value.strip()))
    named = {name.lower(): value for name, value in fields}
    keep = version == "HTTP/1.1" and named.get("connection", "").lower() != "close"
    if method == "HEAD" or status in _NO_BODY or status < 200:
        return status, fields, b"", keep
    if "chunked" in named.get("transfer-encoding", "").lower():
        return status, fields, await _chunks(reader), keep
    length = named.get("content-length")
    if length is not None:
        return status, fields, await reader.readexactly(int(length)), keep
    return status, fields, await reader.read(), False  # the answer ends with the connection


async def _chunks(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
