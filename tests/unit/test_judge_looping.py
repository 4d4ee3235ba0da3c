"""Looping, per-step budgets and counters: the judge's rules for reports that repeat."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from watchkeeper.contract import Condition, KindSpec, Owner, OwnerKind, RunStatus, RunView
from watchkeeper.judge import budget_of, judge, next_deadline

NOW = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)
SPEC = KindSpec("crawl", budget_s=600, expected_s=None)
ALIVE = Owner(OwnerKind.LEASE, None, True, NOW + timedelta(seconds=60))


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def run(**changes: object) -> RunView:
    base = RunView(
        kind="crawl",
        run_id="r1",
        title="crawl example.org",
        status=RunStatus.RUNNING,
        state_token="a1v1",
        owner=ALIVE,
        progress_at=ago(10),
        started_at=ago(100),
        step="calling web.search",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_five_identical_reports_in_a_row_are_looping() -> None:
    verdict = judge(run(progress_at=ago(40), reported_at=ago(1), repeats=5), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.LOOPING
    assert verdict.paged
    assert verdict.since == ago(40)  # when the repetition began
    assert verdict.reason == "repeating 'calling web.search' 5 times since 12:29 UTC"


def test_four_identical_reports_are_not_yet_looping() -> None:
    assert judge(run(progress_at=ago(40), reported_at=ago(1), repeats=4), SPEC, NOW) is None


def test_the_kind_sets_how_many_repeats_loop_and_zero_turns_the_count_off() -> None:
    repeating = run(progress_at=ago(40), reported_at=ago(1), repeats=3)
    three = judge(repeating, replace(SPEC, loop_after=3), NOW)
    assert three is not None and three.condition is Condition.LOOPING
    assert judge(replace(repeating, repeats=50), replace(SPEC, loop_after=0), NOW) is None


def test_identical_reports_for_longer_than_the_budget_are_looping_however_few() -> None:
    verdict = judge(run(progress_at=ago(601), reported_at=ago(5), repeats=2), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.LOOPING
    assert verdict.reason.endswith("longer than its 600 s budget")
    assert judge(run(progress_at=ago(600), reported_at=ago(5), repeats=2), SPEC, NOW) is None


def test_a_looping_run_whose_reports_stop_is_stalled_as_before() -> None:
    verdict = judge(run(progress_at=ago(900), reported_at=ago(601), repeats=7), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STALLED
    assert verdict.since == ago(1)  # a budget after its last report
    assert "its last 7 reports all said 'calling web.search'" in verdict.reason


def test_a_report_that_says_something_new_is_progress() -> None:
    # What the store records for a new step or a higher count: one report, no repeats.
    assert judge(run(progress_at=ago(1), reported_at=ago(1), repeats=1), SPEC, NOW) is None


def test_counters_say_what_repeats() -> None:
    verdict = judge(run(repeats=6, reported_at=ago(1), done=3, total=40), SPEC, NOW)
    assert verdict is not None
    assert "repeating 'calling web.search' at 3 of 40 6 times" in verdict.reason
    unnamed = judge(run(step=None, repeats=6, reported_at=ago(1), done=3), SPEC, NOW)
    assert unnamed is not None and "repeating the same report at 3 6 times" in unnamed.reason


def test_an_observed_line_is_named_instead_of_the_step() -> None:
    verdict = judge(run(repeats=9, reported_at=ago(1), repeating="retrying in 5s"), SPEC, NOW)
    assert verdict is not None and verdict.reason.startswith("repeating 'retrying in 5s' 9 times")


def test_a_step_budget_stalls_while_the_runs_budget_would_not() -> None:
    stepped = run(step="running the test suite", progress_at=ago(3), step_budget_s=2)
    verdict = judge(replace(stepped, budget_s=600), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.STALLED
    assert verdict.since == ago(1)
    assert verdict.reason == (
        "no progress for more than 2 s, the budget of its step 'running the test suite'"
    )
    assert budget_of(stepped, SPEC) == 2


def test_a_long_step_budget_holds_off_the_runs_budget() -> None:
    long_step = run(progress_at=ago(1200), budget_s=600, step_budget_s=1800)
    assert judge(long_step, SPEC, NOW) is None
    assert judge(replace(long_step, step_budget_s=None), SPEC, NOW) is not None


def test_a_steps_expected_time_makes_it_slow_never_paged() -> None:
    verdict = judge(run(progress_at=ago(45), step_expected_s=30), SPEC, NOW)
    assert verdict is not None
    assert verdict.condition is Condition.SLOW
    assert not verdict.paged
    assert verdict.since == ago(15)
    assert "'calling web.search' is running longer than the expected 30 s" in verdict.reason


def test_waiting_and_ended_work_never_loops() -> None:
    repeating = run(progress_at=ago(40), reported_at=ago(1), repeats=20)
    assert judge(replace(repeating, status=RunStatus.WAITING), SPEC, NOW) is None
    assert judge(replace(repeating, status=RunStatus.SUCCEEDED), SPEC, NOW) is None


def test_a_gone_owner_is_stuck_before_looping() -> None:
    gone = Owner(OwnerKind.LEASE, None, False, ago(5))
    verdict = judge(run(repeats=20, reported_at=ago(6), owner=gone), SPEC, NOW)
    assert verdict is not None and verdict.condition is Condition.STUCK


def test_deadlines_of_a_repeating_run() -> None:
    no_lease = Owner(OwnerKind.LEASE, None, True, None)
    repeating = run(progress_at=ago(100), reported_at=ago(10), repeats=2, owner=no_lease)
    # Looping once the same reports have come for a whole budget, before they would stall.
    assert next_deadline(repeating, SPEC, NOW) == ago(100) + timedelta(seconds=600)
    stepped = run(progress_at=ago(10), step_budget_s=30, step_expected_s=5, owner=no_lease)
    assert next_deadline(stepped, SPEC, NOW) == ago(10) + timedelta(seconds=30)
    assert next_deadline(replace(stepped, step_expected_s=25), SPEC, NOW) == ago(10) + timedelta(
        seconds=25
    )
