"""A platform's quickest answer falls at once and rises again once it is old."""

from __future__ import annotations

import pytest

from watchkeeper.notify.answer_times import AnswerTimes


def test_an_answer_slower_than_the_quickest_counts_the_difference() -> None:
    times = AnswerTimes(window_s=60)
    assert times.lag("telegram", 0.005, now_s=0) == 0
    assert times.lag("telegram", 0.205, now_s=1) == pytest.approx(0.2)


def test_a_quicker_answer_is_the_new_floor_at_once() -> None:
    times = AnswerTimes(window_s=60)
    times.lag("telegram", 0.2, now_s=0)
    assert times.lag("telegram", 0.05, now_s=1) == 0
    assert times.lag("telegram", 0.1, now_s=2) == pytest.approx(0.05)


def test_a_path_that_got_slower_for_good_stops_counting_as_late_after_the_window() -> None:
    times = AnswerTimes(window_s=60)
    times.lag("slack", 0.005, now_s=0)
    assert times.lag("slack", 0.3, now_s=59) == pytest.approx(0.295)
    assert times.lag("slack", 0.3, now_s=61) == 0
    assert times.lag("slack", 0.31, now_s=62) == pytest.approx(0.01)


def test_each_platform_has_its_own_floor() -> None:
    times = AnswerTimes(window_s=60)
    times.lag("telegram", 0.005, now_s=0)
    assert times.lag("discord", 0.4, now_s=1) == 0
    assert times.lag("telegram", 0.4, now_s=1) == pytest.approx(0.395)
