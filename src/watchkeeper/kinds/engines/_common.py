"""What every engine adapter shares: its options, a readable address, and what moved when.

Engines rarely date progress themselves (Celery's result backend dates only the end, RQ's
``job.meta`` carries no time), so :class:`Moves` remembers what each run looked like and
when the adapter first saw it change, by the sweep's own clock.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from watchkeeper.contract import Effects


class EngineOptions(BaseModel):
    """The options every engine kind takes besides the kind's usual keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(min_length=1)
    effects: Literal["none", "unknown"] = "unknown"

    @property
    def effects_value(self) -> Effects:
        """The effects every run of this kind is shown with (``none``: plain Retry)."""
        return Effects(self.effects)


def shown_url(url: str) -> str:
    """``url`` fit for a message: its password masked."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}:***@{host}", parts.path, parts.query, ""))


def digest(value: Any) -> str:
    """A short stable digest of any JSON-like value."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def epoch(value: float | int | str | None) -> datetime | None:
    """Epoch seconds or ISO 8601 text as an aware UTC time; naive text is UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def short(value: Any, limit: int = 300) -> str:
    """A value shown on one line of at most ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Moves:
    """When each run last moved, as the adapter saw it.

    ``seen(run_id, look, now)`` answers the time the run's ``look`` (a digest of what it
    reports: its progress meta, its checkpoint) was first seen. A run seen for the first
    time answers ``first``: the caller decides how much benefit of the doubt a run gets
    that was already running before watchkeeper looked.
    """

    def __init__(self) -> None:
        self._looks: dict[str, tuple[str, datetime | None]] = {}
        self._lock = threading.Lock()

    def seen(
        self, run_id: str, look: str, now: datetime, first: datetime | None
    ) -> datetime | None:
        """When ``run_id`` last changed how it looks."""
        with self._lock:
            known = self._looks.get(run_id)
            if known is None:
                self._looks[run_id] = (look, first)
                return first
            if known[0] != look:
                self._looks[run_id] = (look, now)
                return now
            return known[1]

    def keep_only(self, run_ids: Iterable[str]) -> None:
        """Forget runs no longer read, so memory follows the engine's active work."""
        keep = set(run_ids)
        with self._lock:
            for run_id in [r for r in self._looks if r not in keep]:
                del self._looks[run_id]


class Strikes:
    """Runs seen without a live owner, counted over reads.

    An engine's two records of one run are never read in one instant (a worker's list of
    what it runs and the result store, say), so a run is taken for ownerless only when two
    reads in a row found it so.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def orphaned(self, run_id: str, ownerless: bool) -> bool:
        """Record this read's finding; ``True`` once two reads in a row found no owner."""
        with self._lock:
            if not ownerless:
                self._counts.pop(run_id, None)
                return False
            count = self._counts.get(run_id, 0) + 1
            self._counts[run_id] = count
            return count >= 2

    def keep_only(self, run_ids: Iterable[str]) -> None:
        """Forget runs no longer read."""
        keep = set(run_ids)
        with self._lock:
            for run_id in [r for r in self._counts if r not in keep]:
                del self._counts[run_id]
