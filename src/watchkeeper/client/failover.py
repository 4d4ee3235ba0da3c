"""A client of several replicas of one server: one at a time, the next when it is down.

Replicas of ``watchkeeper serve`` on one database answer every call alike,
so a daemon that must keep talking (a runner renewing its leases) is given
all their URLs. It talks to one; a call that cannot reach it, or that it
answers with a ``5xx``, is asked again of the next, and that one is used
from then on. A ``4xx`` is the server's answer (``lease_lost`` included) and
is returned as it is. The runner's calls are safe to ask twice: a renewal or
heartbeat under the same lease token or runner id means the same thing on any
replica.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from watchkeeper.backoff import backoff_delay
from watchkeeper.client import Client
from watchkeeper.client.busy import Busy, pause
from watchkeeper.client.queue import Jobs, Runners
from watchkeeper.errors import ClientError

log = logging.getLogger(__name__)

#: Rounds over every URL one call makes before its last error is raised.
ROUNDS = 3
#: The pause after a round in which no replica answered, growing to :data:`BACKOFF_CAP_S`.
BACKOFF_S = 0.2
BACKOFF_CAP_S = 2.0


def split_urls(values: Iterable[str]) -> list[str]:
    """The URLs in ``values``, each of which may hold several separated by commas.

    Order is kept (the first is tried first); repeats and blanks are dropped.
    """
    urls: list[str] = []
    for value in values:
        for part in value.split(","):
            url = part.strip().rstrip("/")
            if url and url not in urls:
                urls.append(url)
    return urls


def _moves_on(exc: ClientError) -> bool:
    # Status 0: the replica could not be reached, or the connection broke mid-call.
    return exc.status == 0 or exc.status >= 500


class FailoverClient:
    """The runner's side of the API over several replicas (see the module's docstring).

    ``sleep`` waits between rounds; inject one in tests.
    """

    def __init__(
        self,
        urls: Sequence[str],
        token: str | None = None,
        *,
        timeout: float = 10.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not urls:
            raise ValueError("a failover client needs at least one URL")
        self._members = [Client(url, token, timeout=timeout) for url in urls]
        self.timeout = timeout
        self._sleep = sleep
        self._current = 0
        #: The replica last said to be in use, and why the one before it was left.
        self._announced = 0
        self._why = ""
        self._lock = threading.Lock()
        self.jobs = Jobs(self)
        self.runners = Runners(self)

    @property
    def url(self) -> str:
        """The URL of the replica in use now."""
        return self._members[self._current].url

    @property
    def urls(self) -> list[str]:
        """Every replica's URL, in the order they are tried."""
        return [member.url for member in self._members]

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`Client.request` on the replica in use, moving on while replicas fail."""
        return self._on_replicas(Client.request, method, path, **kwargs)

    def request_text(self, method: str, path: str, **kwargs: Any) -> str:
        """:meth:`Client.request_text` on the replica in use, moving on while replicas fail."""
        text: str = self._on_replicas(Client.request_text, method, path, **kwargs)
        return text

    def _on_replicas(self, call: Callable[..., Any], method: str, path: str, **kwargs: Any) -> Any:
        last: ClientError | None = None
        for round_ in range(ROUNDS):
            if round_:
                self._sleep(backoff_delay(round_ - 1, initial=BACKOFF_S, cap=BACKOFF_CAP_S))
            for _ in self._members:
                index = self._current
                try:
                    result = call(self._members[index], method, path, **kwargs)
                except ClientError as exc:
                    if _moves_on(exc):
                        last = exc
                        self._move_on(index, exc)
                        continue
                    self._settled(index)  # a 4xx is an answer: that replica is up
                    raise
                self._settled(index)
                return result
        assert last is not None
        if len(self._members) == 1:
            raise last
        urls = ", ".join(self.urls)
        message = f"no replica answered ({urls}); the last said: {last.message}"
        raise ClientError(last.status, last.code, message) from last

    def request_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """:meth:`request` for a JSON object."""
        result: dict[str, Any] = self.request(method, path, **kwargs)
        return result

    def request_when_free(
        self, method: str, path: str, *, deadline: float | None, **kwargs: Any
    ) -> Any:
        """:meth:`request`, asking again after each ``429`` as its ``Retry-After`` says."""
        while True:
            try:
                return self.request(method, path, **kwargs)
            except Busy as busy:
                pause(busy, deadline)

    def _move_on(self, failed: int, exc: ClientError) -> None:
        with self._lock:
            # Another thread's call may have moved on from this replica already.
            if self._current == failed:
                self._current = (failed + 1) % len(self._members)
                self._why = exc.message

    def _settled(self, index: int) -> None:
        # Said once per switch, when a replica answers: not on every try while all are down.
        with self._lock:
            if index == self._announced:
                return
            log.warning(
                "watchkeeper at %s failed (%s): now using %s",
                self._members[self._announced].url,
                self._why,
                self._members[index].url,
                extra={"action": "client_failover"},
            )
            self._announced = index

    def close(self) -> None:
        """Close every replica's connection pool."""
        for member in self._members:
            member.close()

    def __enter__(self) -> FailoverClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
