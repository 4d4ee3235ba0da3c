"""A platform's quickest answer falls at once and rises again once it is old."""

from __future__ import annotations

import pytest

from watchkeeper.notify.answer_times import AnswerTimes

#: Each case: answers in order, as (platform, seconds it took, when it came, lag expected).
CASES: dict[str, list[tuple[str, float, float, float]]] = {
    "a slower answer counts the difference": [
        ("telegram", 0.005, 0, 0),
        ("telegram", 0.205, 1, 0.2),
    ],
    "a quicker answer is the new floor at once": [
        ("telegram", 0.2, 0, 0),
        ("telegram", 0.05, 1, 0),
        ("telegram", 0.1, 2, 0.05),
    ],
    "a path that got slower for good stops counting as late after the window": [
        ("slack", 0.005, 0, 0),
        ("slack", 0.3, 59, 0.295),
        ("slack", 0.3, 61, 0),
        ("slack", 0.31, 62, 0.01),
    ],
    "each platform has its own floor": [
        ("telegram", 0.005, 0, 0),
        ("discord", 0.4, 1, 0),
        ("telegram", 0.4, 1, 0.395),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
def test_lag_behind_the_quickest_recent_answer(name: str) -> None:
    times = AnswerTimes(window_s=60)
    lags = [times.lag(platform, took, now_s=at) for platform, took, at, _ in CASES[name]]
    assert lags == pytest.approx([expected for *_, expected in CASES[name]])
