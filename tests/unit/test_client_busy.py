"""How long the SDK waits after a ``429``: from ``Retry-After``, bounded either way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from watchkeeper.client.busy import (
    DEFAULT_PAUSE_S,
    MAX_PAUSE_S,
    MIN_PAUSE_S,
    Busy,
    pause,
    retry_after,
)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("5", 5.0),
        (" 2.5 ", 2.5),
        ("0", MIN_PAUSE_S),
        ("-3", MIN_PAUSE_S),
        ("86400", MAX_PAUSE_S),
        (None, DEFAULT_PAUSE_S),
        ("", DEFAULT_PAUSE_S),
        ("soon", DEFAULT_PAUSE_S),
        ("nan", DEFAULT_PAUSE_S),
    ],
)
def test_retry_after_in_seconds(header: str | None, expected: float) -> None:
    assert retry_after(header) == expected


def test_retry_after_as_an_http_date() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    assert 10 < retry_after(later) <= 20
    past = format_datetime(datetime.now(UTC) - timedelta(hours=1), usegmt=True)
    assert retry_after(past) == MIN_PAUSE_S


def test_pause_sleeps_as_told_but_never_past_the_deadline() -> None:
    slept: list[float] = []
    busy = Busy("too_many_requests", "busy", 5.0)
    pause(busy, None, slept.append)
    assert slept == [5.0]
    pause(busy, float("inf"), slept.append)
    assert slept[-1] == 5.0
    with pytest.raises(Busy) as raised:
        pause(busy, 0.0, slept.append)  # long passed
    assert raised.value.status == 429 and raised.value.code == "too_many_requests"
