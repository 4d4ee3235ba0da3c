"""Spend groups: a group with only unpriced calls has no cost, and one model is one group."""

from __future__ import annotations

import pytest

from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.timeline import spend
from watchkeeper.timeline.service import TimelineService

MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000)


def _call(model: str, provider: str = "anthropic") -> NewEvent:
    return NewEvent(
        "implementer", org="acme", role="implementer", usage=MILLION, model=model, provider=provider
    )


def test_a_group_of_only_unpriced_calls_has_no_cost(timeline: TimelineService) -> None:
    timeline.ingest([_call("claude-private-9"), _call("claude-haiku-4-5")], "runner")
    body = spend.report(timeline.store, "model").as_dict()
    groups = {group["key"]: group for group in body["groups"]}
    assert groups["claude-private-9"]["cost"] is None
    assert groups["claude-private-9"]["unpriced"] == 1
    assert groups["claude-haiku-4-5"]["cost"] == pytest.approx(6.0)
    assert body["totals"]["cost"] == pytest.approx(6.0) and body["totals"]["unpriced"] == 1


def test_totals_of_only_unpriced_calls_have_no_cost(timeline: TimelineService) -> None:
    timeline.ingest([_call("claude-private-9"), _call("other-private", "nowhere")], "runner")
    totals = spend.report(timeline.store, "provider").as_dict()["totals"]
    assert totals["cost"] is None and totals["unpriced"] == 2 and totals["calls"] == 2


def test_one_model_reported_in_two_spellings_is_one_group(timeline: TimelineService) -> None:
    timeline.ingest([_call("claude-haiku-4-5")], "runner-a")
    timeline.ingest([_call("Claude-Haiku-4-5")], "runner-b")
    timeline.ingest([_call("Private-Model"), _call("private-model")], "runner-c")
    timeline.ingest([_call("Coder-1", "acme")], "runner-d")  # priced by an override
    groups = {g.key: g for g in spend.report(timeline.store, "model").groups}
    assert set(groups) == {"claude-haiku-4-5", "private-model", "coder-1"}
    haiku = groups["claude-haiku-4-5"]
    assert haiku.calls == 2 and haiku.cost == pytest.approx(12.0)
    assert groups["private-model"].calls == 2 and groups["private-model"].cost is None
    assert groups["coder-1"].cost == pytest.approx(5.0)


def test_a_call_without_provider_is_grouped_by_its_model_lowercased(
    timeline: TimelineService,
) -> None:
    calls = [NewEvent("tool", org="acme", usage=MILLION, model=name) for name in ("M-1", "m-1")]
    timeline.ingest(calls, "runner")
    groups = spend.report(timeline.store, "model").groups
    assert [(g.key, g.calls, g.cost) for g in groups] == [("m-1", 2, None)]
