"""Durations and exit statuses as the command line reads and reports them."""

from __future__ import annotations

import pytest

from watchkeeper.cli.app.procs import parse_duration
from watchkeeper.errors import InvalidInput
from watchkeeper.procs.settle import exit_status


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("10m", 600.0),
        ("2h", 7200.0),
        ("1d", 86400.0),
        ("2h30m", 9000.0),
        ("1.5h", 5400.0),
        (" 1H 30M ", 5400.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "--timeout") == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5m", "0", "5x", "m", "30m5", "inf", "nan", "1e999"])
def test_bad_durations_say_what_to_write(text: str) -> None:
    with pytest.raises(InvalidInput, match="--budget"):
        parse_duration(text, "--budget")


def test_exit_status_as_a_shell_shows_it() -> None:
    assert exit_status(3, None, "failed") == 3
    assert exit_status(None, 15, "cancelled") == 128 + 15
    assert exit_status(None, None, "failed") == 1
    assert exit_status(None, None, "succeeded") == 0
