"""Abort settles from the witness even when the shim writes it just after the first look.

The shim writes the witness, then exits. Abort must therefore look at the shim
before the witness: a witness missing while the shim still lived may yet come,
but one missing after the shim is gone never will. Here the shim is held
stopped (SIGSTOP) so the first look finds no witness, then let go (SIGCONT)
before abort checks on it: the witness is written and the shim has exited in
between, every time.
"""

from __future__ import annotations

import asyncio
import os
import signal
from datetime import datetime
from pathlib import Path

import pytest

from watchkeeper.procs import abort, settle, witness
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.records.procs import AbortOutcome, ProcRun, ProcStatus
from watchkeeper.store.procs import ProcStore

from ...support.waiting import wait_for
from .conftest import gone, start_detached


def _witness_lands_after_the_first_look(
    monkeypatch: pytest.MonkeyPatch, shim_pid: int
) -> list[witness.Witness | None]:
    """Let the stopped shim go right after the first read of its witness, and wait for it."""
    real = settle.read_witness
    seen: list[witness.Witness | None] = []

    def read_then_release(
        data_dir: Path, run: ProcRun, procs: ProcStore, now: datetime
    ) -> witness.Witness | None:
        found = real(data_dir, run, procs, now)
        if not seen:
            os.kill(shim_pid, signal.SIGCONT)
            wait_for(lambda: gone(shim_pid), what=f"the shim {shim_pid} to write and exit")
        seen.append(found)
        return found

    monkeypatch.setattr(settle, "read_witness", read_then_release)
    return seen


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_abort_reads_the_witness_the_shim_wrote_after_the_first_look(
    engine: ProcEngine, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    run = start_detached(engine, "sleep", "300")
    started = wait_for(lambda: engine.get(run.run_id).shim_pid, what="the shim's pid")
    os.kill(started, signal.SIGSTOP)  # it cannot write the witness until let go
    seen = _witness_lands_after_the_first_look(monkeypatch, started)
    if mode == "sync":
        result = abort.abort(engine.procs, engine.data_dir, run.run_id, engine.clock(), grace_s=1)
    else:
        result = asyncio.run(
            abort.abort_async(engine.procs, engine.data_dir, run.run_id, engine.clock(), grace_s=1)
        )
    assert seen[0] is None  # the first look came before the witness
    assert result.outcome is AbortOutcome.SIGNALED
    assert result.run.status is ProcStatus.CANCELLED, result.run.reason
    assert result.run.signal == 15
    assert result.run.reason == "aborted on request: killed by signal 15 (SIGTERM)"
