"""What the engine tests share: one Redis of their own per session, a clock that starts now,
and a runtime whose kinds read an engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.contract import RunView
from watchkeeper.decide.actors import Actor
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.redis_server import RedisServer, redis_server

ANA = Actor("@ana", "api", is_admin=True)


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server of the engine tests' own, started once per session."""
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def now_clock() -> ManualClock:
    """A manual clock starting at the real time: engines date what they record by the wall
    clock, so the test's clock starts there and then moves only when the test moves it."""
    return ManualClock(datetime.now(UTC))


OpenRuntime = Callable[[dict[str, Any]], Runtime]


@pytest.fixture
def engine_runtime(tmp_path: Path, store: Store, now_clock: ManualClock) -> Iterator[OpenRuntime]:
    """Opens a runtime on the test store (SQLite, then PostgreSQL) with the given kinds."""
    opened: list[Runtime] = []

    def open_runtime(kinds: dict[str, Any]) -> Runtime:
        settings = make_settings(tmp_path, store.url, kinds=kinds)
        runtime = Runtime.open(
            settings, clock=now_clock, store=store, notifier=OpsNotifier(settings.ops)
        )
        opened.append(runtime)
        return runtime

    yield open_runtime
    for runtime in opened:
        runtime.sweeper.close()


def run_of(runtime: Runtime, kind: str, run_id: str, now: datetime) -> RunView | None:
    """One run of ``kind`` as its adapter reads it at ``now``."""
    adapter = runtime.sweeper.adapters[kind]
    return next((run for run in adapter.read(now) if run.run_id == run_id), None)


def past_budget(clock: ManualClock, run: RunView, budget_s: float) -> None:
    """Move the test's clock a second past ``run``'s budget, counted from the run's own last
    move: an engine dates a start by the wall clock, seconds after the test's clock began on
    a loaded machine, so a jump of the budget from the clock's start can fall short of it."""
    last_move = run.progress_at or run.started_at
    assert last_move is not None, f"{run.run_id} was read with no time it last moved"
    lag = max(0.0, (last_move - clock()).total_seconds())
    clock.advance(lag + budget_s + 1)


def live_incident(runtime: Runtime, run_id: str) -> Any:
    """The live incident on ``run_id``, or ``None``."""
    return next((i for i in runtime.store.incidents.list("live") if i.key.run_id == run_id), None)
