"""A process printing the same lines again and again is looping, as watchkeeper reads its
output; a new line moves it on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.config import KindConfig
from watchkeeper.contract import Condition
from watchkeeper.judge import judge
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.process import ProcessAdapter
from watchkeeper.procs import layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.store import Store

from ...conftest import make_settings
from ...support.waiting import wait_for
from .conftest import kill_leftovers


@pytest.fixture
def procs(store: Store, tmp_path: Path, clock: ManualClock) -> Iterator[ProcEngine]:
    engine = ProcEngine(store, tmp_path / "data", clock=clock, grace_s=2.0)
    yield engine
    kill_leftovers(engine)


def test_a_process_printing_the_same_line_loops_and_a_new_line_moves_it_on(
    procs: ProcEngine, store: Store, tmp_path: Path, clock: ManualClock
) -> None:
    go = tmp_path / "go"
    script = (
        "echo connecting; for i in 1 2 3 4 5; do echo 'retrying in 5s'; done; "
        f"while [ ! -f {go} ]; do sleep 0.02; done; echo connected; sleep 120"
    )
    request = LaunchRequest(argv=("sh", "-c", script), detach=True, budget_s=600)
    run_id = procs.start(request).run.run_id
    log = layout.log_path(procs.data_dir, run_id)
    wait_for(lambda: log.read_bytes().count(b"retrying") == 5, what="five repeated lines")
    settings = make_settings(tmp_path, store.url)
    kind = ProcessAdapter("process", KindConfig(adapter="process"), AdapterContext(settings, store))
    procs.sweep(clock.advance(1))
    (seen,) = [v for v in kind.read(clock()) if v.run_id == run_id]
    assert (seen.repeats, seen.repeating) == (5, "retrying in 5s")
    found = judge(seen, kind.spec, clock())
    assert found is not None and found.condition is Condition.LOOPING
    assert found.reason.startswith("repeating 'retrying in 5s' 5 times since")
    procs.sweep(clock.advance(1))
    (again,) = [v for v in kind.read(clock()) if v.run_id == run_id]
    assert again.state_token == seen.state_token  # no move: a card's buttons stay good

    go.touch()
    wait_for(lambda: log.read_bytes().endswith(b"connected\n"), what="a new line")
    procs.sweep(clock.advance(1))
    (moved,) = [v for v in kind.read(clock()) if v.run_id == run_id]
    assert moved.repeats == 0 and moved.state_token != seen.state_token
    assert judge(moved, kind.spec, clock()) is None
