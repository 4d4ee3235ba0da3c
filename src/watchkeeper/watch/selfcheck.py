"""Is supervision itself working? Exactly one "down" notice and one "up" notice per outage.

Kept in memory on purpose: the database may be the very thing that is down.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol


class NoticeKind(StrEnum):
    """The two notices an outage produces."""

    DOWN = "supervision_down"
    UP = "supervision_up"


@dataclass(frozen=True, slots=True)
class Notice:
    """A notice for operators about supervision itself."""

    kind: NoticeKind
    at: datetime
    failing_since: datetime
    error: str | None

    @property
    def text(self) -> str:
        """The sentence people read."""
        since = self._since()
        if self.kind is NoticeKind.DOWN:
            failing = f"sweeps have failed since {since} ({self.error})"
            return f"Run supervision is not working: {failing}"
        return f"Run supervision is working again after failing since {since}"

    def _since(self) -> str:
        """``12:39 UTC``, as every message says a time; with its day when that was another."""
        if self.failing_since.date() == self.at.date():
            return f"{self.failing_since:%H:%M} UTC"
        return f"{self.failing_since:%Y-%m-%d %H:%M} UTC"


class NoticeSink(Protocol):
    """Where the sweep loop sends its notices; the loop knows nothing of channels."""

    async def send(self, notice: Notice) -> None:
        """Deliver ``notice``; the loop waits for it before its next sweep."""


class SupervisionHealth:
    """Turns a stream of sweep outcomes into at most one down and one up notice per outage."""

    def __init__(self, down_after_s: float) -> None:
        self.down_after_s = down_after_s
        self.failing_since: datetime | None = None
        self.last_error: str | None = None
        self.down_announced = False
        self.last_ok_at: datetime | None = None
        #: When a request (a chat press, ``/runs``) first failed to reach the store, if one
        #: did since the store last answered: sweeps may not have noticed yet.
        self.unreachable_since: datetime | None = None

    def succeeded(self, now: datetime) -> Notice | None:
        """Record a good sweep; returns the "working again" notice if one is due."""
        since = self.failing_since
        announced = self.down_announced
        self.failing_since, self.last_error, self.down_announced = None, None, False
        self.unreachable_since = None
        self.last_ok_at = now
        if announced and since is not None:
            return Notice(NoticeKind.UP, now, since, None)
        return None

    def failed(self, now: datetime, error: str) -> Notice | None:
        """Record a failed sweep; returns the "not working" notice once it is due."""
        if self.failing_since is None:
            self.failing_since = now
        self.last_error = error
        overdue = (now - self.failing_since).total_seconds() >= self.down_after_s
        if overdue and not self.down_announced:
            self.down_announced = True
            return Notice(NoticeKind.DOWN, now, self.failing_since, error)
        return None

    def store_unreachable(self, now: datetime) -> datetime:
        """A request could not reach the store: since when supervision has not been working,
        as far as this process knows (the first failed sweep or request of this outage)."""
        if self.unreachable_since is None:
            self.unreachable_since = now
        if self.failing_since is not None and self.failing_since < self.unreachable_since:
            return self.failing_since
        return self.unreachable_since

    def store_reached(self) -> None:
        """A request reached the store: a later failure starts a new outage."""
        self.unreachable_since = None

    @property
    def working(self) -> bool:
        """False while sweeps are failing."""
        return self.failing_since is None


def not_working(since: datetime, again: str) -> str:
    """``run supervision is not working since ...; press again when it is back (...)``.

    ``again`` is what to do again (``press``, ``ask``). The store's error is
    not in it: this is shown in chats, and the error names internal hosts and
    ports; whoever answers logs it.
    """
    return (
        f"run supervision is not working since {since:%Y-%m-%d %H:%M} UTC; "
        f"{again} again when it is back (the server's log says why)"
    )
