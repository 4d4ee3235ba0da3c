"""The SDK's answer to ``429 Too Many Requests``: wait as told, then ask again.

The server caps the requests one token (and everyone) may hold open at once:
long-polls, event streams and aborts in their grace period. Past a cap it
answers ``429`` with ``Retry-After`` at once. The SDK calls that hit a capped
route wait that long (never longer than :data:`MAX_PAUSE_S`, never past the
caller's own deadline) and ask again, as clients of rate-limited APIs do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from watchkeeper.errors import ClientError

#: Longest one pause, whatever ``Retry-After`` says.
MAX_PAUSE_S = 30.0
#: The pause when the answer has no usable ``Retry-After``.
DEFAULT_PAUSE_S = 1.0
#: Shortest pause: a ``Retry-After: 0`` must not turn into a busy loop.
MIN_PAUSE_S = 0.1


class Busy(ClientError):
    """The server refused the request for now (``429``); ``retry_after_s`` says for how long."""

    def __init__(self, code: str, message: str, retry_after_s: float) -> None:
        super().__init__(429, code, message)
        self.retry_after_s = retry_after_s


def retry_after(
    header: str | None, now: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> float:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP date), bounded."""
    if header is None or not header.strip():
        return DEFAULT_PAUSE_S
    value = header.strip()
    try:
        seconds = float(value)
    except ValueError:
        # Loaded only here: email.utils costs every command that might read this answer.
        from email.utils import parsedate_to_datetime

        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return DEFAULT_PAUSE_S
    if seconds != seconds:  # NaN
        return DEFAULT_PAUSE_S
    return min(MAX_PAUSE_S, max(MIN_PAUSE_S, seconds))


def pause(busy: Busy, deadline: float | None, sleep: Callable[[float], None] = time.sleep) -> None:
    """Wait as ``busy`` says before asking again; re-raise it when ``deadline`` has passed.

    ``deadline`` is on :func:`time.monotonic`'s clock; ``None`` never passes.
    """
    wait = busy.retry_after_s
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise busy
        wait = min(wait, left)
    sleep(wait)
