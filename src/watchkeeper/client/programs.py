"""``client.programs``: the programs a server keeps running on its host (``[programs.NAME]``).

::

    status = client.programs.list()            # programs, groups, host checks
    crawler = client.programs.get("crawler")   # one program with its history
    client.programs.restart("crawler")         # admin: stop it if it runs, start it again
    client.programs.stop("crawl")              # a whole group, in reverse start order
    piece = client.programs.log("crawler")     # the end of its log, redacted
    for text in client.programs.follow("crawler", stop=lambda: done):
        print(text, end="")

docs/programs.md describes the answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from watchkeeper.client.part import ApiPart
from watchkeeper.client.wire import segment

#: How long a follower waits before it asks for more of a log.
FOLLOW_PAUSE_S = 0.5


class Programs(ApiPart):
    """Read the server's programs; start, stop and restart them (admin)."""

    def list(self) -> dict[str, Any]:
        """Every program of the server's host, its groups and its host checks."""
        return self._client.request_object("GET", "/api/v1/programs")

    def get(self, name: str) -> dict[str, Any]:
        """One program, with its latest moments under ``history``."""
        return self._client.request_object("GET", f"/api/v1/programs/{segment(name)}")

    def start(self, name: str) -> dict[str, Any]:
        """Start a stopped program, or a group's programs; ``message`` says what was done."""
        return self._post(f"/api/v1/programs/{segment(name)}/start")

    def stop(self, name: str) -> dict[str, Any]:
        """Stop a program, or a whole group, until it is started again."""
        return self._post(f"/api/v1/programs/{segment(name)}/stop")

    def restart(self, name: str) -> dict[str, Any]:
        """Stop a program if it runs and start it again (a group: the whole group)."""
        return self._post(f"/api/v1/programs/{segment(name)}/restart")

    def log(
        self, name: str, *, offset: int | None = None, tail_bytes: int = 65536
    ) -> dict[str, Any]:
        """The end of the program's log, or (``offset``) what follows that byte, in whole lines:
        ``text``, ``next_offset``, ``size`` and ``generation`` (changes when it is rotated)."""
        params: dict[str, Any] = {"tail_bytes": tail_bytes}
        if offset is not None:
            params["offset"] = offset
        return self._client.request_object(
            "GET", f"/api/v1/programs/{segment(name)}/log", params=params
        )

    def follow(
        self,
        name: str,
        *,
        tail_bytes: int = 65536,
        stop: Callable[[], bool] = lambda: False,
        pause_s: float = FOLLOW_PAUSE_S,
    ) -> Iterator[str]:
        """The end of the log, then each new piece as it is written, until ``stop()`` says so.

        A rotated log is read again from its start.
        """
        piece = self.log(name, tail_bytes=tail_bytes)
        yield piece["text"]
        offset, generation = piece["next_offset"], piece["generation"]
        while not stop():
            piece = self.log(name, offset=offset)
            if piece["generation"] != generation:
                generation = piece["generation"]
                piece = self.log(name, offset=0)
            if piece["text"]:
                yield piece["text"]
            moved = piece["next_offset"] != offset
            offset = piece["next_offset"]
            if not moved:
                time.sleep(pause_s)
