"""The one backoff every retry asks for its delay."""

from __future__ import annotations

import pytest

from watchkeeper.backoff import EQUAL_JITTER, FULL_JITTER, backoff_delay
from watchkeeper.notify.deliverer import backoff_s


def test_without_jitter_delays_double_up_to_the_cap() -> None:
    delays = [backoff_delay(n, initial=1.0, factor=2.0, cap=5.0) for n in range(5)]
    assert delays == [1.0, 2.0, 4.0, 5.0, 5.0]


@pytest.mark.parametrize(
    ("jitter", "low", "high"), [(FULL_JITTER, 0.0, 8.0), (EQUAL_JITTER, 4.0, 8.0)]
)
def test_jitter_draws_within_its_share_of_the_delay(jitter: float, low: float, high: float) -> None:
    def delay(r: float) -> float:
        return backoff_delay(3, initial=1.0, cap=60.0, jitter=jitter, random=lambda: r)

    assert delay(0.999999) == pytest.approx(low, abs=1e-4)
    assert delay(0.0) == high


def test_the_outbox_retries_after_1_2_4_seconds_up_to_five_minutes() -> None:
    assert [backoff_s(n) for n in (0, 1, 2, 3, 9, 10, 50)] == [1, 1, 2, 4, 256, 300, 300]
