"""How much later than usual a platform may have seen a message.

A platform judges its rate limits by when each message reached it. A call that took
longer than the platform's quickest answer may have queued at its door that much
longer, so the next sends keep that much more distance. The quickest answer is a
windowed minimum (as TCP congestion control keeps its minimum round trip): it falls
at once to a quicker answer and, when none as quick came within the window, rises to
the current answer, so one lucky early reply or a path that got slower for good does
not make every later send look late.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How long a quickest answer stands before a slower one may replace it.
QUICKEST_WINDOW_S = 60.0


@dataclass
class _Quickest:
    took_s: float
    seen_at_s: float


class AnswerTimes:
    """Each platform's quickest answer within :data:`QUICKEST_WINDOW_S`."""

    def __init__(self, window_s: float = QUICKEST_WINDOW_S) -> None:
        self.window_s = window_s
        self._quickest: dict[str, _Quickest] = {}

    def lag(self, platform: str, took_s: float, now_s: float) -> float:
        """Count an answer that took ``took_s`` (arriving at ``now_s``) and return how
        much longer it took than the platform's quickest answer."""
        quickest = self._quickest.get(platform)
        if (
            quickest is None
            or took_s <= quickest.took_s
            or (now_s - quickest.seen_at_s > self.window_s)
        ):
            quickest = self._quickest[platform] = _Quickest(took_s, now_s)
        return took_s - quickest.took_s
