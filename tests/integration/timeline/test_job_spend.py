"""A job's spend over HTTP: every round's calls summed as the timeline prices them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from tests.integration.queue.conftest import make_service, submit
from tests.support.cli import wk
from tests.support.live_server import LiveServer, live_server
from watchkeeper.clock import ManualClock
from watchkeeper.queue.service import QueueService
from watchkeeper.records.timeline import NewEvent, Usage
from watchkeeper.runtime import Runtime

MILLION = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=250_000)


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


@pytest.fixture
def queue(tmp_path: Path, runtime: Runtime, clock: ManualClock) -> QueueService:
    return make_service(tmp_path, runtime.store, clock)


def _call(job_id: str, model: str, round_: int) -> NewEvent:
    return NewEvent(
        "implementer",
        job_id=job_id,
        round=round_,
        role="implementer",
        model=model,
        provider="anthropic",
        usage=MILLION,
    )


def _timeline_reads(runtime: Runtime) -> list[str]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if "timeline_events" in statement and statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    event.listen(runtime.store.engine, "before_cursor_execute", count)
    return seen


def test_jobs_show_the_spend_of_all_their_rounds(
    server: LiveServer, runtime: Runtime, queue: QueueService
) -> None:
    priced, unpriced, mixed, idle = (submit(queue, title=t).id for t in "abcd")
    runtime.timeline.ingest(
        [
            _call(priced, "claude-haiku-4-5", 1),
            _call(priced, "claude-haiku-4-5", 2),
            NewEvent("round_start", job_id=priced, round=3),  # not a call
            _call(unpriced, "claude-private-9", 1),
            _call(mixed, "claude-haiku-4-5", 1),
            _call(mixed, "claude-private-9", 1),
            _call(mixed, "claude-private-9", 2),
        ],
        "runner",
    )
    reads = _timeline_reads(runtime)
    with server.client("viewer") as http:
        listed = {job["id"]: job["spend"] for job in http.get("/api/v1/jobs").json()["jobs"]}
        assert len(reads) == 1  # one grouped query for the whole list
        one = http.get(f"/api/v1/jobs/{mixed}").json()["spend"]
    assert listed[priced] == {
        "cost": pytest.approx(listed[priced]["cost"]),
        "calls": 2,
        "unpriced": 0,
        "input_tokens": 2_000_000,
        "output_tokens": 2_000_000,
        "cache_read_tokens": 500_000,
        "cache_write_tokens": 0,
    }
    haiku = runtime.timeline.pricer.price("anthropic", "claude-haiku-4-5", MILLION, runtime.clock())
    assert haiku.cost is not None and haiku.cost > 0
    assert listed[priced]["cost"] == pytest.approx(2 * haiku.cost)
    assert listed[unpriced]["cost"] is None and listed[unpriced]["unpriced"] == 1
    assert listed[mixed]["cost"] == pytest.approx(haiku.cost)
    assert (listed[mixed]["calls"], listed[mixed]["unpriced"]) == (3, 2)
    assert one == listed[mixed]
    nothing = dict.fromkeys(("calls", "unpriced", "input_tokens", "output_tokens"), 0)
    nothing |= {"cost": 0.0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    assert listed[idle] == nothing


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_cli_prints_a_group_without_a_priced_call_as_unpriced(
    server: LiveServer, runtime: Runtime, queue: QueueService, tmp_path: Path
) -> None:
    job = submit(queue).id
    runtime.timeline.ingest([_call(job, "claude-private-9", 1)], "runner")
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f"data_dir = {json.dumps(str(tmp_path / 'data'))}\n", encoding="utf-8")
    env = {
        "WATCHKEEPER_URL": server.url,
        "WATCHKEEPER_TOKEN": server.tokens["viewer"],
        "WATCHKEEPER_CONFIG": str(config),
    }
    printed = wk("spend", "--by", "model", env=env, columns=250)
    assert printed.returncode == 0, printed.stderr
    row = next(line for line in printed.stdout.splitlines() if "claude-private-9" in line)
    assert "unpriced" in row and "0.000000" not in row
