"""Reading a Redis that an engine owns: never blocking it, and saying plainly when it is away.

Keys are found with ``SCAN`` (never ``KEYS``), sorted sets walked with ``ZSCAN``, and values
read in pipelined batches, so a read costs the engine a few short commands per thousand keys
and never holds its event loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from watchkeeper.errors import KindUnreadable
from watchkeeper.kinds.engines._common import shown_url

if TYPE_CHECKING:
    import redis

#: Keys asked for per SCAN step and per pipelined read.
BATCH = 1000
#: A Redis that does not answer within this long is unreadable for this read.
SOCKET_TIMEOUT_S = 5.0


def client(url: str) -> redis.Redis:
    """A client for ``url`` with short time limits; ``decode_responses`` off (values are bytes)."""
    import redis

    try:
        return redis.Redis.from_url(
            url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=SOCKET_TIMEOUT_S
        )
    except ValueError as exc:
        raise KindUnreadable(f"{shown_url(url)} is not a Redis URL: {exc}") from None


class OnRedis:
    """For an engine kind that reads a Redis: one client on ``redis_url``, made on first use
    (an adapter is built when the config loads, long before it reads)."""

    redis_url: str
    _conn: redis.Redis | None = None

    @property
    def conn(self) -> redis.Redis:
        """The client on the engine's Redis."""
        if self._conn is None:
            self._conn = client(self.redis_url)
        return self._conn

    def close(self) -> None:
        """Release the Redis connections."""
        if self._conn is not None:
            self._conn.close()


@contextmanager
def reading(what: str, url: str) -> Iterator[None]:
    """Turn a Redis failure into an unreadable kind that names what could not be read."""
    import redis

    try:
        yield
    except redis.AuthenticationError as exc:
        raise KindUnreadable(f"{what} at {shown_url(url)} refused the credentials: {exc}") from None
    except redis.RedisError as exc:
        raise KindUnreadable(f"cannot reach {what} at {shown_url(url)}: {exc}") from None


def scan(conn: redis.Redis, pattern: str) -> list[bytes]:
    """Every key matching ``pattern``, found with SCAN in steps of :data:`BATCH`."""
    return list(conn.scan_iter(match=pattern, count=BATCH))


def members(conn: redis.Redis, key: str) -> list[tuple[bytes, float]]:
    """Every member of a sorted set with its score, found with ZSCAN in steps of :data:`BATCH`
    (a ZRANGE of the whole set would hold Redis for as long as the set is large)."""
    return list(conn.zscan_iter(key, count=BATCH))


def get_many(conn: redis.Redis, keys: Sequence[bytes | str]) -> list[Any]:
    """``GET`` of every key, one MGET per batch, the batches pipelined."""
    values: list[Any] = []
    for start in range(0, len(keys), BATCH * 10):
        pipe = conn.pipeline(transaction=False)
        chunk = keys[start : start + BATCH * 10]
        for offset in range(0, len(chunk), BATCH):
            pipe.mget(chunk[offset : offset + BATCH])
        for part in pipe.execute():
            values.extend(part)
    return values


def hashes(conn: redis.Redis, keys: Sequence[str], fields: Sequence[str]) -> list[list[Any]]:
    """``HMGET`` of ``fields`` for every key, pipelined in batches."""
    values: list[list[Any]] = []
    for start in range(0, len(keys), BATCH):
        pipe = conn.pipeline(transaction=False)
        for key in keys[start : start + BATCH]:
            pipe.hmget(key, list(fields))
        values.extend(pipe.execute())
    return values
