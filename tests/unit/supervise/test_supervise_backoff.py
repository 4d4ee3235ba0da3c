from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watchkeeper.supervise import Backoff, ConfigurationError


def test_delays_grow_exponentially_until_the_cap() -> None:
    backoff = Backoff(initial=0.5, factor=2.0, cap=3.0, jitter=0.0)
    assert [backoff.duration(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_full_jitter_scales_the_delay_by_the_random_source() -> None:
    backoff = Backoff(initial=1.0, factor=2.0, cap=100.0, jitter=1.0, random=lambda: 0.25)
    assert backoff.duration(2) == pytest.approx(4.0 * 0.75)


def test_partial_jitter_keeps_the_rest_of_the_delay() -> None:
    backoff = Backoff(initial=1.0, factor=2.0, cap=100.0, jitter=0.5, random=lambda: 0.999999)
    assert backoff.duration(0) == pytest.approx(0.5, rel=1e-5)


def test_huge_attempts_return_the_cap_without_overflow() -> None:
    backoff = Backoff(initial=0.1, factor=3.0, cap=60.0, jitter=0.0)
    assert backoff.duration(10_000) == 60.0


def test_none_never_waits() -> None:
    assert {Backoff.none().duration(n) for n in range(50)} == {0.0}


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": -1.0}, {"factor": 0.5}, {"jitter": 1.5}, {"cap": -2.0}],
)
def test_invalid_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Backoff(**kwargs)


def test_negative_attempt_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="attempt"):
        Backoff().duration(-1)


@given(
    attempt=st.integers(min_value=0, max_value=5000),
    initial=st.floats(min_value=0.0, max_value=10.0),
    factor=st.floats(min_value=1.0, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=600.0),
    r=st.floats(min_value=0.0, max_value=0.999999),
)
def test_duration_stays_within_zero_and_cap(
    attempt: int, initial: float, factor: float, cap: float, r: float
) -> None:
    backoff = Backoff(initial=initial, factor=factor, cap=cap, jitter=1.0, random=lambda: r)
    assert 0.0 <= backoff.duration(attempt) <= cap
    assert backoff.ceiling(attempt) <= backoff.ceiling(attempt + 1) or backoff.ceiling(
        attempt
    ) == pytest.approx(cap)
