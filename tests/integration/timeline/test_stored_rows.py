"""The exact rows a batch leaves in ``timeline_events``, on SQLite and PostgreSQL.

Ingest takes shortcuts for speed (rows built straight as the driver's tuples,
prices and redactions reused within a batch); whatever it does, each stored
column must hold what the rules say: priced on the provider it ran on at the
time of the call, redacted, capped, the org filled from its job.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from sqlalchemy import select

from tests.integration.queue.conftest import submit
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.store.schema.timeline import timeline_events
from watchkeeper.timeline.service import TimelineService

VERSION = f"genai-prices {genai_prices.__version__}"
SECRET = "review: export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx; password=hunter2"
SECRET_CLEAN = "review: export OPENAI_API_KEY=[redacted]; password=[redacted]"
LONG = "a long note with token=abc123def456 in it, line after line\n" * 40
#: A model whose price changed on 2026-03-13 (linear after, tiered before): the price
#: follows the call's time. The batch sends the later day first, so a price kept from it
#: would show on the earlier day's call.
SONNET = ("claude-sonnet-4-6", "anthropic")
BEFORE = datetime(2026, 3, 1, 12, tzinfo=UTC)
AFTER = datetime(2026, 3, 20, 12, tzinfo=UTC)


def _capped(text: str, limit: int) -> str:
    return text[: limit - len(" [truncated]")] + " [truncated]"


def _library(usage: Usage, model: str, provider: str, at: datetime) -> float:
    found = genai_prices.calc_price(
        genai_prices.Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        ),
        model,
        provider_id=provider,
        genai_request_timestamp=at,
    )
    return float(found.total_price)


def _override(usage: Usage) -> float:
    # acme/coder-1 costs 1 USD per million input tokens (cached ones too) and 4 per million out.
    per_token = Decimal(1) / Decimal(1_000_000)
    return float(usage.input_tokens * per_token + usage.output_tokens * 4 * per_token)


def _stored(timeline: TimelineService) -> list[dict[str, Any]]:
    statement = select(timeline_events).order_by(timeline_events.c.id)
    with timeline.store._engine.connect() as conn:
        return [
            {k: v for k, v in row._mapping.items() if k != "id"} for row in conn.execute(statement)
        ]


def test_a_mixed_batch_stores_exactly_the_expected_rows(
    timeline: TimelineService, queue: QueueService, clock: ManualClock
) -> None:
    job = submit(queue, org="acme")
    usage = Usage(
        input_tokens=300_000, output_tokens=1_000, cache_read_tokens=1_000, cache_write_tokens=500
    )
    small = Usage(input_tokens=1_200, output_tokens=30)
    plus_two = timezone(timedelta(hours=2))
    sent = [
        NewEvent(
            "implementer",
            at=AFTER,
            job_id=job.id,
            task_id="t-1",
            round=1,
            role="impl",
            model=SONNET[0],
            provider=SONNET[1],
            usage=usage,
            rationale=SECRET,
        ),
        NewEvent(
            "implementer",
            at=AFTER + timedelta(hours=3),
            job_id=job.id,
            task_id="t-1",
            round=1,
            model=SONNET[0],
            provider=SONNET[1],
            usage=small,
        ),
        NewEvent(
            "implementer",
            at=BEFORE,
            job_id=job.id,
            task_id="t-1",
            round=2,
            model=SONNET[0],
            provider=SONNET[1],
            usage=usage,
            rationale=SECRET,
        ),
        NewEvent(
            "review",
            at=BEFORE.astimezone(plus_two),
            org="beta",
            model="Coder-1",
            provider="ACME",
            usage=small,
            name="tool token=abcdef123456",
            detail=LONG,
        ),
        NewEvent(
            "review",
            at=AFTER.replace(tzinfo=None),
            job_id="j-unknown",
            model="Claude-Private-9",
            provider="anthropic",
            usage=small,
            name="x" * 300,
        ),
        NewEvent(
            "tool", job_id=job.id, model="gpt-4o", usage=small, name="tool token=abcdef123456"
        ),
        NewEvent("tool", provider="openai", usage=small, outcome="failed", duration_s=2.5),
        NewEvent("verify", at=AFTER, task_id="t-1", round=2, fingerprint="fp", detail="all good"),
        NewEvent("session_end", job_id=job.id),
    ]
    clock.advance(30)
    now = clock().timestamp()
    done = timeline.ingest(sent, "r" * 300)

    base = {
        "org": None,
        "job_id": None,
        "task_id": None,
        "round": None,
        "fingerprint": None,
        "outcome": None,
        "duration_s": None,
        "name": None,
        "role": None,
        "model": None,
        "provider": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost": None,
        "unpriced": False,
        "price_model": None,
        "price_provider": None,
        "price_version": None,
        "rationale": None,
        "detail": None,
        "received_at": now,
        "reporter": "r" * 200,
    }
    tokens = {
        "input_tokens": 300_000,
        "output_tokens": 1_000,
        "cache_read_tokens": 1_000,
        "cache_write_tokens": 500,
    }
    small_tokens = {"input_tokens": 1_200, "output_tokens": 30}
    before, after = BEFORE.timestamp(), AFTER.timestamp()
    expected = [
        {
            **base,
            "org": "acme",
            "job_id": job.id,
            "task_id": "t-1",
            "at": after,
            "day": "2026-03-20",
            "phase": "implementer",
            "round": 1,
            "role": "impl",
            "model": SONNET[0],
            "provider": SONNET[1],
            **tokens,
            "cost": _library(usage, *SONNET, AFTER),
            "price_model": SONNET[0],
            "price_provider": SONNET[1],
            "price_version": VERSION,
            "rationale": SECRET_CLEAN,
        },
        {
            **base,
            "org": "acme",
            "job_id": job.id,
            "task_id": "t-1",
            "at": after + 3 * 3600,
            "day": "2026-03-20",
            "phase": "implementer",
            "round": 1,
            "model": SONNET[0],
            "provider": SONNET[1],
            **small_tokens,
            "cost": _library(small, *SONNET, AFTER + timedelta(hours=3)),
            "price_model": SONNET[0],
            "price_provider": SONNET[1],
            "price_version": VERSION,
        },
        {
            **base,
            "org": "acme",
            "job_id": job.id,
            "task_id": "t-1",
            "at": before,
            "day": "2026-03-01",
            "phase": "implementer",
            "round": 2,
            "model": SONNET[0],
            "provider": SONNET[1],
            **tokens,
            "cost": _library(usage, *SONNET, BEFORE),
            "price_model": SONNET[0],
            "price_provider": SONNET[1],
            "price_version": VERSION,
            "rationale": SECRET_CLEAN,
        },
        {
            **base,
            "org": "beta",
            "at": before,
            "day": "2026-03-01",
            "phase": "review",
            "model": "Coder-1",
            "provider": "ACME",
            **small_tokens,
            "cost": _override(small),
            "price_model": "Coder-1",
            "price_provider": "ACME",
            "price_version": "override",
            "name": "tool token=[redacted]",
            "detail": _capped(LONG.replace("abc123def456", "[redacted]"), 1000),
        },
        {
            **base,
            "job_id": "j-unknown",
            "at": after,
            "day": "2026-03-20",
            "phase": "review",
            "model": "Claude-Private-9",
            "provider": "anthropic",
            **small_tokens,
            "unpriced": True,
            "price_model": "claude-private-9",
            "price_provider": "anthropic",
            "price_version": VERSION,
            "name": _capped("x" * 300, 200),
        },
        {
            **base,
            "org": "acme",
            "job_id": job.id,
            "at": now,
            "day": "2026-01-05",
            "phase": "tool",
            "model": "gpt-4o",
            **small_tokens,
            "unpriced": True,
            "name": "tool token=[redacted]",
        },
        {
            **base,
            "at": now,
            "day": "2026-01-05",
            "phase": "tool",
            "provider": "openai",
            **small_tokens,
            "unpriced": True,
            "outcome": "failed",
            "duration_s": 2.5,
        },
        {
            **base,
            "task_id": "t-1",
            "at": after,
            "day": "2026-03-20",
            "phase": "verify",
            "round": 2,
            "fingerprint": "fp",
            "detail": "all good",
        },
        {
            **base,
            "org": "acme",
            "job_id": job.id,
            "at": now,
            "day": "2026-01-05",
            "phase": "session_end",
        },
    ]

    stored = _stored(timeline)
    for got, want in zip(stored, expected, strict=True):
        cost, wanted_cost = got.pop("cost"), want.pop("cost")
        if wanted_cost is None:
            assert cost is None, want["phase"]
        else:
            assert cost == pytest.approx(wanted_cost, rel=1e-12, abs=0), want["phase"]
        assert {**got, "unpriced": bool(got["unpriced"])} == want
    costs = [_library(usage, *SONNET, BEFORE), _library(usage, *SONNET, AFTER), _override(small)]
    costs.append(_library(small, *SONNET, AFTER))
    assert costs[0] != costs[1]  # the price change is real, so the test can see a stale price
    assert (done.count, done.unpriced) == (9, 3) and done.cost == pytest.approx(sum(costs))


def test_a_batch_reports_each_stored_row_to_the_exporters(
    timeline: TimelineService, clock: ManualClock
) -> None:
    seen: list[Any] = []
    timeline.exporters.append(seen.extend)
    small = Usage(input_tokens=1_200, output_tokens=30)
    timeline.ingest(
        [
            NewEvent(
                "review", at=BEFORE, model="coder-1", provider="acme", usage=small, rationale=SECRET
            ),
            NewEvent("tool", name="x" * 300),
        ],
        "runner",
    )

    def facts(events: list[Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in e.as_dict().items() if k != "id"} for e in events]

    stored = sorted(timeline.events(), key=lambda event: event.id)  # by arrival, as sent
    assert facts(seen) == facts(stored)
    assert seen[0].rationale == SECRET_CLEAN and seen[0].price.cost == _override(small)
    assert seen[1].name == _capped("x" * 300, 200) and seen[1].at == clock()
