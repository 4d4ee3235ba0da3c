"""Two engines on one host and one PostgreSQL, each with its own data folder.

Each settles only the runs it started: the witness, owner file and hook log
of a run live in the data folder of the engine that started it, so another
folder's engine would find none of them and judge a healthy run lost.
SQLite cannot be shared across data folders (its file lives in one), so
these run on PostgreSQL only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.procs import identity, layout, reaper
from watchkeeper.procs.engine import FIRING_STALE_S, ProcEngine
from watchkeeper.records.procs import HookState, NewProc, ProcStatus
from watchkeeper.store import Store

from ...support.waiting import wait_for
from .conftest import gone, kill_leftovers, start_detached, wait_witness

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
#: Far past every grace the engine keeps (start, firing, abort).
PAST_EVERY_GRACE_S = reaper.START_GRACE_S + FIRING_STALE_S + 86_400


@pytest.fixture
def pair(
    tmp_path: Path, store: Store, clock: ManualClock
) -> Iterator[tuple[ProcEngine, ProcEngine]]:
    """Engines A and B: one store, one clock, one host, two data folders."""
    engines = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        engines.append(ProcEngine(store, folder, clock=clock, grace_s=2.0))
    yield engines[0], engines[1]
    kill_leftovers(engines[0])


def test_a_run_is_settled_by_the_engine_of_its_own_data_folder_only(
    tmp_path: Path, clock: ManualClock, pair: tuple[ProcEngine, ProcEngine]
) -> None:
    a, b = pair
    go, fired = tmp_path / "go", tmp_path / "fired.txt"
    run = start_detached(
        a,
        "sh",
        "-c",
        f"while [ ! -e {go} ]; do sleep 0.05; done",
        on_done_cmd=f'echo "$WATCHKEEPER_RUN_ID" >> {fired}',
    )
    assert run.shim_pid is not None
    clock.advance(PAST_EVERY_GRACE_S)
    assert b.reconcile_startup() == 0
    b.sweep(clock())
    assert a.get(run.run_id).status is ProcStatus.RUNNING

    # The command ends: its witness is in A's folder, and its shim is gone.
    go.touch()
    wait_witness(a, run)
    wait_for(lambda: gone(run.shim_pid or 0), what="the shim to exit", timeout=30.0)
    assert b.reconcile_startup() == 0
    swept = b.sweep(clock())
    reaped = b.reap()
    assert (swept.reaped.collected, swept.reaped.reclaimed, swept.hooks) == ([], [], [])
    assert (reaped.collected, reaped.reclaimed) == ([], [])
    still = a.get(run.run_id)
    assert (still.status, still.reason, still.hook_state) == (
        ProcStatus.RUNNING,
        None,
        HookState.WAITING,
    )
    assert not layout.run_dir(b.data_dir, run.run_id).exists()

    # A's own sweep settles it from the witness and fires its hook.
    assert a.sweep(clock()).reaped.collected == [run.run_id]
    done = a.get(run.run_id)
    assert (done.status, done.exit_code, done.hook_state) == (
        ProcStatus.SUCCEEDED,
        0,
        HookState.FIRED,
    )
    assert fired.read_text().splitlines() == [run.run_id]


def test_hooks_of_a_run_are_fired_and_reconciled_by_its_own_engine_only(
    tmp_path: Path, clock: ManualClock, pair: tuple[ProcEngine, ProcEngine]
) -> None:
    a, b = pair
    fired = tmp_path / "fired.txt"
    run = start_detached(a, "true", on_done_cmd=f'echo "$WATCHKEEPER_RUN_ID" >> {fired}')
    wait_witness(a, run)
    # A ended the run but stopped before firing its hook: the hook is due.
    assert reaper.reap(a.procs, a.data_dir, clock()).collected == [run.run_id]
    assert a.get(run.run_id).hook_state is HookState.PENDING
    clock.advance(PAST_EVERY_GRACE_S)
    assert b.sweep(clock()).hooks == []
    assert a.get(run.run_id).hook_state is HookState.PENDING
    assert not fired.exists()

    # A claimed the hook and stopped mid-fire: only A's restart may call it maybe fired.
    assert a.procs.claim_hook(run.run_id, clock())
    clock.advance(FIRING_STALE_S + 1)
    assert b.reconcile_startup() == 0
    b.sweep(clock())
    assert a.get(run.run_id).hook_state is HookState.FIRING
    assert a.reconcile_startup() == 1
    assert a.get(run.run_id).hook_state is HookState.MAYBE_FIRED
    assert not fired.exists()


def test_a_run_recorded_with_its_host_only_is_settled_by_any_engine_of_that_host(
    clock: ManualClock, pair: tuple[ProcEngine, ProcEngine]
) -> None:
    # Rows written before runs named their data folder say only the host: as before,
    # every engine of that host may settle them.
    a, b = pair
    legacy = NewProc(
        "p-legacy000001", "legacy", ("true",), "/", identity.host(), "someone", None, True
    )
    a.procs.register(legacy, clock())
    clock.advance(PAST_EVERY_GRACE_S)
    assert b.reap().reclaimed == [legacy.run_id]
    assert a.get(legacy.run_id).status is ProcStatus.FAILED
