"""The push kind's sweep read finds exactly what a full read would, on both databases."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from sqlalchemy import insert

from watchkeeper.clock import ManualClock
from watchkeeper.judge import judge, next_deadline
from watchkeeper.runtime import Runtime
from watchkeeper.store.schema import push_runs

STATUSES = ["running"] * 6 + ["waiting", "succeeded", "failed", "cancelled"]


def random_rows(rng: random.Random, now: float, count: int) -> list[dict[str, object]]:
    rows = []
    for index in range(count):
        status = rng.choice(STATUSES)
        started = now - rng.uniform(0, 4000)
        progress = min(now, started + rng.uniform(0, 4000))
        seen = min(now, progress + rng.uniform(0, 300))
        ended = status in {"succeeded", "failed", "cancelled"}
        rows.append(
            {
                "run_id": f"r{index}",
                "kind": "crawl",
                "title": "t",
                "status": status,
                "attempt": 1,
                "version": rng.randint(1, 5),
                "origin": None,
                "effects": rng.choice(["none", "unknown"]),
                "budget_s": rng.choice([None, None, 30.0, 600.0]),
                "expected_s": rng.choice([None, None, 100.0, 3000.0]),
                "lease_s": rng.choice([30.0, 90.0, 600.0]),
                "started_at": started,
                "progress_at": progress,
                "seen_at": seen,
                # Some ended long ago: outside the one-day window.
                "finished_at": (now - rng.choice([10.0, 200_000.0])) if ended else None,
                "updated_at": seen,
                "failure_reason": "boom" if status == "failed" else None,
                "failure_fingerprint": "f" if status == "failed" else None,
            }
        )
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sweep_read_equals_full_read(runtime: Runtime, clock: ManualClock, seed: int) -> None:
    rng = random.Random(seed)
    now = clock()
    with runtime.store.engine.begin() as conn:
        conn.execute(insert(push_runs), random_rows(rng, now.timestamp(), 400))
    adapter = runtime.sweeper.adapters["crawl"]
    spec = adapter.spec
    full = adapter.read(now)
    watched = {f"r{i}" for i in rng.sample(range(400), 20)}
    swept = adapter.read_for_sweep(now, watched)

    def verdicts(runs: object) -> set[tuple[str, str]]:
        found = set()
        for run in runs:  # type: ignore[attr-defined]
            verdict = judge(run, spec, now)
            if verdict is not None:
                found.add((run.run_id, verdict.condition.value))
        return found

    assert verdicts(swept.runs) == verdicts(full)
    assert len(verdicts(full)) > 20  # the data really has something to find
    assert {r.run_id for r in full} & watched <= {run.run_id for run in swept.runs}
    assert swept.total == len(full)
    assert len(swept.runs) < len(full)
    full_deadlines = [d for r in full if (d := next_deadline(r, spec, now))]
    swept_deadlines = [d for r in swept.runs if (d := next_deadline(r, spec, now))]
    if swept.deadline is not None:
        swept_deadlines.append(swept.deadline)
    assert min(swept_deadlines) == pytest.approx(min(full_deadlines), abs=timedelta(milliseconds=1))
