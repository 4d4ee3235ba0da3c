"""Option values read without pydantic mean, and fail, as Typer's own check has them."""

from __future__ import annotations

import pytest

from ..support.cli import wk

NOWHERE = ("--server", "http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0.05", "Invalid value for '--watch': Input should be greater than or equal to 0.1"),
        ("abc", "Invalid value for '--watch': Input should be a valid number"),
        ("1e", "Invalid value for '--watch': Input should be a valid number"),
    ],
)
def test_a_bad_number_is_told_as_before(value: str, said: str) -> None:
    done = wk("runs", "--watch", value, *NOWHERE)
    assert done.returncode == 2
    assert said in done.stderr


def test_a_good_number_and_text_reach_the_command() -> None:
    # Past option parsing, the command asks the server at the URL it was given.
    done = wk("runs", "--watch", "2.5", *NOWHERE, timeout=30)
    assert done.returncode == 1
    assert "cannot reach watchkeeper at http://127.0.0.1:9 (from --server)" in done.stderr
