"""``client.silences``: silence matching work for a while, list silences, expire one early.

::

    silence = client.silences.add(kind="crawl", title="nightly *", duration="2h",
                                  comment="reindexing; crawls will stall")
    client.silences.list()                     # the active ones (all=True: ended too)
    client.silences.expire(silence["id"])      # ends it now; its end is announced once
    client.incidents.ack(12)                   # "I am on it", without deciding

Each matcher given must match: ``kind``, ``run_id``, ``title`` (a glob over the
whole title, or with ``title_syntax="regex"`` a regular expression searched in
it) and ``origin`` (``PLATFORM:CHAT`` or ``PLATFORM:CHAT/THREAD``).
"""

from __future__ import annotations

import builtins
from typing import Any

from watchkeeper.client.part import ApiPart, present
from watchkeeper.client.wire import segment


class Silences(ApiPart):
    """Create, list and expire silences (creating and expiring need an admin token)."""

    def add(
        self,
        *,
        duration: str | float,
        kind: str | None = None,
        run_id: str | None = None,
        title: str | None = None,
        title_syntax: str = "glob",
        origin: str | None = None,
        comment: str = "",
    ) -> dict[str, Any]:
        """Silence matching work from now for ``duration`` (seconds, or ``"1h"``, ``"30m"``)."""
        body = present(kind=kind, run_id=run_id, title=title, origin=origin)
        body.update(duration=duration, comment=comment, title_syntax=title_syntax)
        return self._post("/api/v1/silences", body)

    def list(self, *, all: bool = False) -> builtins.list[dict[str, Any]]:
        """Silences, newest first: the active ones, or with ``all`` ended ones too."""
        params = {"state": "all" if all else "active"}
        result = self._client.request("GET", "/api/v1/silences", params=params)
        silences: builtins.list[dict[str, Any]] = result["silences"]
        return silences

    def get(self, silence_id: int) -> dict[str, Any]:
        """One silence, with the ids of the incidents it held back under ``incidents``."""
        return self._client.request_object("GET", f"/api/v1/silences/{segment(silence_id)}")

    def expire(self, silence_id: int) -> dict[str, Any]:
        """End a silence now."""
        return self._client.request_object("DELETE", f"/api/v1/silences/{segment(silence_id)}")
