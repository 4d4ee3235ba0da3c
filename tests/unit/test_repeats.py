"""What "the same observation again" is, for output lines and timeline rounds."""

from __future__ import annotations

from watchkeeper.kinds.repeats import (
    QUOTED_MAX,
    Repetition,
    last_event_at,
    repeated_lines,
    repeated_rounds,
)


def test_the_same_last_line_counted_back_to_back() -> None:
    tail = b"starting\nretrying in 5s\nretrying in 5s  \n\nretrying in 5s\n"
    assert repeated_lines(tail, whole=True) == Repetition(3, "retrying in 5s")


def test_a_line_that_differs_is_no_repeat() -> None:
    assert repeated_lines(b"page 1\npage 2\npage 3\n", whole=True) is None
    assert repeated_lines(b"only once\n", whole=True) is None


def test_a_repeated_block_of_lines_is_named_whole() -> None:
    tail = b"x\ncalling web.search\nno results\ncalling web.search\nno results\n"
    assert repeated_lines(tail, whole=True) == Repetition(2, "calling web.search / no results")


def test_an_unfinished_line_and_a_cut_first_line_are_left_out() -> None:
    # The tail starts inside "retrying": that piece may be cut, so it is not counted.
    tail = b"ing\nretrying\nretrying\nretr"
    assert repeated_lines(tail) == Repetition(2, "retrying")
    assert repeated_lines(b"retrying\nretrying\n", whole=True) == Repetition(2, "retrying")
    assert repeated_lines(b"retrying\nretrying\n") is None  # the first of the two may be cut


def test_carriage_returns_end_lines_too() -> None:
    assert repeated_lines(b"50%\r50%\r50%\r", whole=True) == Repetition(3, "50%")


def test_a_long_line_is_quoted_short() -> None:
    line = b"x" * 500
    found = repeated_lines(line + b"\n" + line + b"\n", whole=True)
    assert found is not None and len(found.what) == QUOTED_MAX and found.what.endswith("…")


def test_rounds_repeating_the_last_fingerprint() -> None:
    facts = [
        (1.0, 1, None),
        (2.0, 1, "a"),
        (3.0, 2, "b"),
        (4.0, 3, None),  # no fingerprint once the task fingerprints: skipped
        (5.0, 4, "b"),
        (6.0, None, None),  # an event outside any round
        (7.0, 5, "b"),
    ]
    assert repeated_rounds(facts) == Repetition(3, "round fingerprint b")
    assert repeated_rounds([*facts, (8.0, 6, "c")]) is None
    assert repeated_rounds([(1.0, 1, "a")]) is None
    assert last_event_at(facts) == 7.0
    assert last_event_at([]) is None
