"""Timeline events on SQLite and PostgreSQL: every phase stored, redacted, priced, kept."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.integration.queue.conftest import submit
from watchkeeper.clock import ManualClock
from watchkeeper.errors import StoreError
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline import spend
from watchkeeper.timeline.service import PHASES, TimelineService

HAIKU = {"model": "claude-haiku-4-5", "provider": "anthropic"}


def test_each_phase_is_stored_with_its_facts(
    timeline: TimelineService, queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue, org="acme")
    task = job.tasks[0]
    events = [
        NewEvent(
            phase,
            at=clock() + timedelta(seconds=i),
            job_id=job.id,
            task_id=task.id,
            round=None if phase == "session_end" else 1,
            fingerprint="fp-1" if phase == "verify" else None,
            outcome="ok",
            duration_s=1.5 * i,
            name=f"{phase}-name",
            role="implementer",
            rationale=f"because {phase}",
            **HAIKU,
            usage=Usage(1000 * i, 10 * i, 100 * i, 50 * i),
        )
        for i, phase in enumerate(PHASES, start=1)
    ]
    clock.advance(60)
    done = timeline.ingest(events, "runner-1")
    assert done.count == len(PHASES) and done.unpriced == 0 and done.cost > 0
    stored = timeline.events(job_id=job.id)
    assert [e.phase for e in stored] == list(PHASES)
    for i, (sent, got) in enumerate(zip(events, stored, strict=True), start=1):
        assert got.at == sent.at and got.received_at == clock()
        assert (got.job_id, got.task_id, got.org) == (job.id, task.id, "acme")  # org from the job
        assert (got.round, got.fingerprint, got.outcome) == (sent.round, sent.fingerprint, "ok")
        assert (got.duration_s, got.name, got.role) == (1.5 * i, sent.name, "implementer")
        assert got.usage == sent.usage and got.rationale == f"because {sent.phase}"
        assert got.price.model == "claude-haiku-4-5" and got.price.provider == "anthropic"
        assert got.price.version is not None and got.price.cost is not None
        assert got.reporter == "runner-1"
    assert sum(e.price.cost or 0 for e in stored) == pytest.approx(done.cost)


def test_text_is_redacted_and_capped_before_it_is_stored(timeline: TimelineService) -> None:
    secret_text = (
        "reviewer says: export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx and "
        "Authorization: Bearer abc.def.ghi, db postgresql://app:s3cret@db/x, "
        "password=hunter2, aws AKIAABCDEFGHIJKLMNOP"
    )
    long_note = "the reviewer's long note, line after line\n" * 2000
    timeline.ingest(
        [
            NewEvent(
                "review",
                task_id="t-1",
                rationale=secret_text,
                detail=long_note,
                name="tool token=abcdef123456",
            )
        ],
        "runner",
    )
    (event,) = timeline.events(task_id="t-1")
    for leaked in (
        "sk-abcdef",
        "abc.def.ghi",
        "s3cret",
        "hunter2",
        "AKIAABCDEFGHIJKLMNOP",
        "abcdef123456",
    ):
        assert leaked not in (event.rationale or "") + (event.name or "")
    assert "[redacted]" in (event.rationale or "")
    assert event.detail is not None and len(event.detail) == 1000
    assert event.detail.endswith("[truncated]")


def test_events_outlive_the_job_and_task_they_describe(
    timeline: TimelineService, queue: QueueService
) -> None:
    job = submit(queue)
    queue.cancel(job.id)
    timeline.ingest([NewEvent("session_end", job_id=job.id, task_id=job.tasks[0].id)], "r")
    queue.delete(job.id)
    (kept,) = timeline.events(job_id=job.id)
    assert kept.task_id == job.tasks[0].id and kept.org == "free"


def test_a_batch_is_stored_all_or_nothing(timeline: TimelineService) -> None:
    good = timeline.row(NewEvent("tool", task_id="t-1"), timeline.clock(), 0.0, "r")
    bad = {**good, "phase": None}
    with pytest.raises(StoreError):
        timeline.store.append([good, good, bad])
    assert timeline.events(task_id="t-1") == []


def test_a_task_looping_on_the_same_change_stops_progressing(
    timeline: TimelineService, clock: ManualClock
) -> None:
    def round_(number: int, fingerprint: str) -> None:
        for phase in ("round_start", "implementer", "tool", "review"):
            clock.advance(10)
            timeline.ingest([NewEvent(phase, task_id="t-loop", round=number)], "r")
        clock.advance(10)
        timeline.ingest(
            [NewEvent("verify", task_id="t-loop", round=number, fingerprint=fingerprint)], "r"
        )

    assert timeline.last_progress_at("t-loop") is None
    round_(1, "diff-a+failed")
    moved_at = clock()
    assert timeline.last_progress_at("t-loop") == moved_at
    round_(2, "diff-a+failed")
    round_(3, "diff-a+failed")
    assert timeline.last_progress_at("t-loop") == moved_at  # events arrive; no progress
    round_(4, "diff-b+passed")
    assert timeline.last_progress_at("t-loop") == clock()
    timeline.ingest([NewEvent("tool", task_id="t-other", at=clock() - timedelta(hours=1))], "r")
    assert timeline.last_progress_many(["t-loop", "t-other", "t-none"]) == {
        "t-loop": clock(),
        "t-other": clock() - timedelta(hours=1),
    }


def test_spend_under_routing_by_every_key(
    timeline: TimelineService, queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue, org="acme")
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    timeline.ingest(
        [
            NewEvent("implementer", job_id=job.id, role="implementer", usage=million, **HAIKU),
            NewEvent(
                "review",
                job_id=job.id,
                role="architect",
                usage=million,
                model="claude-haiku-4-5",
                provider="quicksilverpro",
            ),
            NewEvent(
                "implementer",
                org="beta",
                role="implementer",
                usage=million,
                model="coder-1",
                provider="acme",
            ),
            NewEvent(
                "review",
                org="beta",
                role="architect",
                usage=million,
                model="claude-private-9",
                provider="anthropic",
            ),
            NewEvent("round_start", org="beta"),  # not a model call: no spend row
        ],
        "runner",
    )
    by_provider = {g.key: g for g in spend.report(timeline.store, "provider").groups}
    direct, resold = by_provider["anthropic"], by_provider["quicksilverpro"]
    assert direct.cost == pytest.approx(6.0) and direct.unpriced == 1 and direct.calls == 2
    assert resold.cost == pytest.approx(4.8) and resold.unpriced == 0
    assert by_provider["acme"].cost == pytest.approx(5.0)  # the override: 1 + 4 per million
    by_model = spend.report(timeline.store, "model")
    haiku = next(g for g in by_model.groups if g.key == "claude-haiku-4-5")
    assert haiku.cost == pytest.approx(10.8) and haiku.calls == 2
    body = by_model.as_dict()
    assert body["totals"]["unpriced"] == 1 and body["totals"]["calls"] == 4
    assert body["totals"]["cost"] == pytest.approx(15.8)
    by_role = {g.key: g.cost for g in spend.report(timeline.store, "role").groups}
    assert by_role == pytest.approx({"implementer": 11.0, "architect": 4.8})
    by_org = {g.key: g.cost for g in spend.report(timeline.store, "org").groups}
    assert by_org == pytest.approx({"acme": 10.8, "beta": 5.0})
    by_job = spend.report(timeline.store, "job", job_id=job.id)
    assert [g.key for g in by_job.groups] == [job.id]
    assert [g.key for g in spend.report(timeline.store, "day").groups] == ["2026-01-05"]
    later = spend.report(timeline.store, "org", since=clock() + timedelta(seconds=1))
    assert later.groups == ()


def test_exporters_see_each_stored_batch_and_a_failing_one_loses_nothing(
    timeline: TimelineService, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[list[str]] = []

    def broken(_events: object) -> None:
        raise RuntimeError("collector down")

    timeline.exporters = [broken, lambda events: seen.append([e.phase for e in events])]
    with caplog.at_level("ERROR"):
        timeline.ingest([NewEvent("tool", task_id="t-x"), NewEvent("verify", task_id="t-x")], "r")
    assert seen == [["tool", "verify"]]
    assert [e.phase for e in timeline.events(task_id="t-x")] == ["tool", "verify"]
    (logged,) = [r for r in caplog.records if r.getMessage() == "A timeline exporter failed"]
    assert logged.action == "timeline_export"
