"""The progress rule: rounds that repeat the previous round's fingerprint are not progress."""

from __future__ import annotations

from watchkeeper.timeline.service import clean, progress_time


def test_events_outside_rounds_are_progress() -> None:
    assert progress_time([]) is None
    assert progress_time([(10.0, None, None), (20.0, None, None)]) == 20.0


def test_a_round_that_repeats_the_previous_fingerprint_is_not_progress() -> None:
    facts = [
        (10.0, 1, None),
        (15.0, 1, "diff-a"),  # round 1 moved: progress at 15
        (20.0, 2, None),
        (25.0, 2, "diff-a"),  # round 2 repeats it
        (30.0, 3, None),
        (35.0, 3, "diff-a"),  # and so does round 3
    ]
    assert progress_time(facts) == 15.0


def test_a_new_fingerprint_is_progress_at_its_round_s_last_event() -> None:
    facts = [(10.0, 1, "a"), (20.0, 2, "a"), (30.0, 3, None), (31.0, 3, "b"), (32.0, 3, None)]
    assert progress_time(facts) == 32.0


def test_going_back_to_an_older_fingerprint_still_differs_from_the_previous_one() -> None:
    assert progress_time([(10.0, 1, "a"), (20.0, 2, "b"), (30.0, 3, "a")]) == 30.0


def test_an_undecided_round_counts_only_before_the_first_fingerprint() -> None:
    # A reporter that never fingerprints is judged by its events.
    assert progress_time([(10.0, 1, None), (20.0, 2, None)]) == 20.0
    # Once rounds are fingerprinted, a round in flight is progress only when it shows it moved.
    assert progress_time([(10.0, 1, "a"), (20.0, 2, None), (21.0, 2, None)]) == 10.0


def test_a_looping_task_with_events_outside_rounds_counts_those_events() -> None:
    facts = [(10.0, 1, "a"), (20.0, 2, "a"), (25.0, None, None), (30.0, 3, "a")]
    assert progress_time(facts) == 25.0


def test_rounds_are_judged_in_round_order_whatever_order_events_arrive() -> None:
    assert progress_time([(30.0, 2, "a"), (10.0, 1, "a")]) == 10.0


def test_clean_redacts_then_caps() -> None:
    text = "password=hunter2 token: ghp_" + "x" * 30 + " then " + "log line\n" * 500
    cleaned = clean(text, 100)
    assert cleaned is not None and len(cleaned) == 100
    assert "hunter2" not in cleaned and "ghp_" not in cleaned
    assert cleaned.endswith(" [truncated]")
    assert clean(None) is None
    assert clean("short") == "short"
