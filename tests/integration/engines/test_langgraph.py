"""The langgraph engine kind against real LangGraph graphs with LangGraph's SQLite and
PostgreSQL checkpointers, each graph run by a subprocess of its own.

A graph that hangs in a node is stalled within its budget (and stays stalled, never stuck,
when its process is killed: checkpoints name no owner); an ``interrupt`` is waiting, never
stalled; a node's exception is failed. Only Dismiss and Ask to diagnose are offered. On both
of watchkeeper's stores.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from watchkeeper import config
from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition, RunStatus
from watchkeeper.errors import KindUnreadable
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.engines.langgraph import LangGraphAdapter

from ...conftest import PG_ADMIN_URL
from ...support.waiting import wait_for
from ...support.workers import APPS, app_env
from ..helpers import sweep
from .apps import lg_app
from .conftest import OpenRuntime, live_incident, run_of

pytestmark = pytest.mark.slow(seconds=30)
BUDGET_S = 300


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def checkpoints(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Where the graphs keep their checkpoints: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('lg') / 'checkpoints.db'}"
        make_checkpoint_tables(url)
        yield url
        return
    request.getfixturevalue("pg_schema_url")  # skips or fails when PostgreSQL is away
    schema = f"lg_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    libpq = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    url = f"{libpq}?options=-csearch_path%3D{schema}"
    make_checkpoint_tables(url)
    yield url
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


def make_checkpoint_tables(url: str) -> None:
    """Make the checkpointer's tables once, as a deployment does before its workers start.

    Each graph's own ``setup()`` then finds them made: two first setups at once race in
    PostgreSQL's catalogue (a duplicate ``pg_type`` key) and in SQLite's lock, which is
    LangGraph's to settle, not what these tests judge.
    """
    with lg_app.checkpointer(url):
        pass


class Graph:
    """One graph run on one thread: in a thread of the test, or in a subprocess to be killed."""

    def __init__(self, url: str, mode: str, folder: Path, *, killable: bool = False) -> None:
        self.thread = f"{mode}-{uuid.uuid4().hex[:6]}"
        self.gate = str(folder / self.thread)
        self.process: subprocess.Popen[bytes] | None = None
        self.runner: threading.Thread | None = None
        self.error: BaseException | None = None
        if killable:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "lg_app", url, self.thread, mode, self.gate],
                env=app_env({}),
                cwd=APPS,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        else:
            self.runner = threading.Thread(target=self._run, args=(url, mode), daemon=True)
            self.runner.start()

    def _run(self, url: str, mode: str) -> None:
        try:
            lg_app.main(url, self.thread, mode, self.gate)
        except Exception as exc:  # noqa: BLE001 - a failing graph is what some tests run
            self.error = exc

    def open(self, number: int) -> None:
        Path(f"{self.gate}.{number}").touch()

    def ended(self) -> bool:
        if self.process is not None:
            return self.process.poll() is not None
        return self.runner is not None and not self.runner.is_alive()

    def stop(self) -> None:
        for number in (1, 2, 3):
            self.open(number)
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=20)
        if self.runner is not None:
            self.runner.join(timeout=20)


@pytest.fixture
def graphs(tmp_path: Path) -> Iterator[list[Graph]]:
    started: list[Graph] = []
    yield started
    for graph in started:
        graph.stop()


def first_read(runtime: Any, thread: str, now: datetime) -> Any:
    """The thread once its checkpointer has made its tables and written a checkpoint."""
    try:
        return run_of(runtime, "graphs", thread, now)
    except KindUnreadable:
        return None


def kinds(url: str) -> dict[str, Any]:
    return {"graphs": {"engine": "langgraph", "url": url, "budget_s": BUDGET_S}}


def test_a_hung_graph_is_stalled_never_stuck_and_offers_dismiss_and_diagnose(
    checkpoints: str,
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    graphs: list[Graph],
    tmp_path: Path,
) -> None:
    runtime = engine_runtime(kinds(checkpoints))
    graph = Graph(checkpoints, "hang", tmp_path, killable=True)
    graphs.append(graph)
    run = wait_for(
        lambda: (
            (r := first_read(runtime, graph.thread, now_clock())) and r.step == "next: w1" and r
        ),
        what="the checkpoint before its first node",
    )
    assert run.status is RunStatus.RUNNING and run.step == "next: w1"
    assert run.owner.alive is None  # checkpoints name nobody who runs them
    assert run.progress_at is not None
    now_clock.set(max(now_clock(), run.progress_at) + timedelta(seconds=BUDGET_S - 1))
    sweep(runtime)
    assert live_incident(runtime, graph.thread) is None
    now_clock.advance(2)
    sweep(runtime)
    incident = live_incident(runtime, graph.thread)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    assert [a.value for a in runtime.decider.offered(incident)] == ["dismiss", "diagnose"]
    assert graph.process is not None
    graph.process.send_signal(signal.SIGKILL)
    graph.process.wait(timeout=20)
    sweep(runtime)
    incident = live_incident(runtime, graph.thread)
    assert incident is not None and incident.key.condition == Condition.STALLED.value


def test_each_checkpoint_is_progress(
    checkpoints: str,
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    graphs: list[Graph],
    tmp_path: Path,
) -> None:
    runtime = engine_runtime(kinds(checkpoints))
    graph = Graph(checkpoints, "steps", tmp_path)
    graphs.append(graph)
    first = wait_for(
        lambda: (
            (r := first_read(runtime, graph.thread, now_clock())) and r.step == "next: w1" and r
        ),
        what="the checkpoint before its first node",
    )
    graph.open(1)
    moved = wait_for(
        lambda: (
            (r := run_of(runtime, "graphs", graph.thread, now_clock()))
            and r.step == "next: w2"
            and r
        ),
        what="the second node's checkpoint",
    )
    assert first.progress_at is not None and moved.progress_at is not None
    assert moved.progress_at > first.progress_at
    # Past the budget counted from the first checkpoint, within it from the second.
    now_clock.set(first.progress_at + timedelta(seconds=BUDGET_S + 0.5))
    if now_clock() < moved.progress_at + timedelta(seconds=BUDGET_S):
        sweep(runtime)
        assert live_incident(runtime, graph.thread) is None
    now_clock.set(moved.progress_at + timedelta(seconds=BUDGET_S + 1))
    sweep(runtime)
    incident = live_incident(runtime, graph.thread)
    assert incident is not None and incident.key.condition == Condition.STALLED.value
    graph.open(2)
    graph.open(3)
    wait_for(graph.ended, what="the graph ending")
    assert graph.error is None
    ended = run_of(runtime, "graphs", graph.thread, now_clock())
    assert ended is not None and ended.status is RunStatus.SUCCEEDED
    sweep(runtime)
    assert live_incident(runtime, graph.thread) is None


def test_an_interrupt_is_waiting_and_an_exception_is_failed(
    checkpoints: str,
    engine_runtime: OpenRuntime,
    now_clock: ManualClock,
    graphs: list[Graph],
    tmp_path: Path,
) -> None:
    runtime = engine_runtime(kinds(checkpoints))
    asking = Graph(checkpoints, "ask", tmp_path)
    failing = Graph(checkpoints, "boom", tmp_path)
    graphs.extend([asking, failing])
    wait_for(asking.ended, what="the graph pausing for a person")
    wait_for(failing.ended, what="the graph failing")
    assert str(failing.error) == "cannot parse the page"
    waiting = run_of(runtime, "graphs", asking.thread, now_clock())
    assert waiting is not None and waiting.status is RunStatus.WAITING
    assert waiting.step == "waiting: approve the draft?"
    now_clock.advance(BUDGET_S * 10)
    sweep(runtime)
    assert live_incident(runtime, asking.thread) is None
    incident = live_incident(runtime, failing.thread)
    assert incident is not None and incident.key.condition == Condition.FAILED.value
    assert incident.reason == "ValueError: cannot parse the page"


def test_checkpoints_that_cannot_be_opened_are_unreadable(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "checkpoints.db"
    table = {"engine": "langgraph", "url": f"sqlite:///{missing}"}
    settings = config.parse({"kinds": {"graphs": table}}, "test")
    adapter = LangGraphAdapter("graphs", KindConfig(**table), AdapterContext(settings, None))
    read = asyncio.run(adapter.read_contained(datetime.now(UTC)))
    assert read.error is not None
    assert read.error.startswith(f"cannot open the checkpoints at {missing}")
