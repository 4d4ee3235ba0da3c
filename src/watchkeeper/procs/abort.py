"""``watchkeeper abort``: end a run's whole process group, after checking it is ours."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.errors import Conflict
from watchkeeper.procs import identity, settle, signals, witness
from watchkeeper.procs.records import AbortOutcome, ProcRun

if TYPE_CHECKING:
    from watchkeeper.store.procs import ProcStore

log = logging.getLogger(__name__)
DEFAULT_GRACE_S = 5.0
# How long to wait for the shim's witness once the group is gone before calling the run lost.
WITNESS_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class AbortResult:
    """What an abort did and the run as it is now."""

    outcome: AbortOutcome
    run: ProcRun
    detail: str


def abort(
    procs: ProcStore,
    data_dir: Path,
    run_id: str,
    now: datetime,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    reason: str = "aborted on request",
    cancel: bool = True,
) -> AbortResult:
    """SIGTERM the run's group, SIGKILL it after ``grace_s``; never signal what is not ours.

    ``cancel`` says a person asked (the run ends ``cancelled``); the engine's
    own aborts (timeouts) pass ``False`` so the run ends ``failed`` and is paged.
    """
    run = procs.get(run_id)
    if run.status.ended:
        return AbortResult(AbortOutcome.ALREADY_EXITED, run, f"already {run.status.value}")
    if run.host != identity.host():
        raise Conflict(f"process run {run_id} runs on host {run.host}: abort it there")
    if run.pid is None or run.pid_start is None or run.pgid is None:
        raise Conflict(f"process run {run_id} has not reported its process yet; try again")
    procs.request_abort(run_id, now, reason, cancel=cancel)
    found = signals.terminate_group(run.pid, run.pid_start, run.pgid, grace_s)
    if found is identity.Ownership.RECYCLED:
        return _not_ours(procs, run, now)
    outcome = AbortOutcome.SIGNALED if found is identity.Ownership.OURS else None
    detail = _settle_after(procs, data_dir, procs.get(run_id), now)
    log.info(
        "Abort of process run %s: %s (%s) because %s",
        run_id,
        (outcome or AbortOutcome.ALREADY_EXITED).value,
        detail,
        reason,
        extra={"action": "proc_abort"},
    )
    return AbortResult(outcome or AbortOutcome.ALREADY_EXITED, procs.get(run_id), detail)


def _not_ours(procs: ProcStore, run: ProcRun, now: datetime) -> AbortResult:
    reason = (
        f"its pid {run.pid} now belongs to another process: the run's own process is gone; "
        "nothing was signaled"
    )
    settle.as_gone(procs, run, reason, now)
    log.warning(
        "Abort of process run %s refused: %s", run.run_id, reason, extra={"action": "proc_abort"}
    )
    return AbortResult(AbortOutcome.NOT_OURS, procs.get(run.run_id), reason)


def _settle_after(procs: ProcStore, data_dir: Path, run: ProcRun, now: datetime) -> str:
    """Record how the run ended: from the witness the shim writes, or as gone without one."""
    if run.status.ended:
        return f"already {run.status.value}"
    deadline = time.monotonic() + WITNESS_WAIT_S
    while True:
        try:
            found = settle.read_witness(data_dir, run)
        except witness.WitnessCorrupt as exc:
            settle.as_gone(procs, run, f"its witness is unreadable: {exc}", now)
            return str(exc)
        if found is not None:
            settle.from_witness(procs, run, found, now)
            return settle.describe(found)
        shim = identity.ownership(run.host, run.boot_id, run.shim_pid, run.shim_start)
        if shim is not identity.Ownership.OURS or time.monotonic() >= deadline:
            break
        time.sleep(0.02)  # the shim is writing the witness right now
    reason = "its process is gone without a witness"
    settle.as_gone(procs, run, reason, now)
    return reason
