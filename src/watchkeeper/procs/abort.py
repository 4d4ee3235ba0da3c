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
from watchkeeper.records.procs import AbortOutcome, ProcRun

if TYPE_CHECKING:
    from watchkeeper.procs.moves import RunMoves

log = logging.getLogger(__name__)
DEFAULT_GRACE_S = 5.0
# How long to wait for the shim's witness once the group is gone before calling the run lost.
WITNESS_WAIT_S = 10.0
# How often to look for the witness meanwhile.
WITNESS_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class AbortResult:
    """What an abort did and the run as it is now."""

    outcome: AbortOutcome
    run: ProcRun
    detail: str


def abort(
    procs: RunMoves,
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
    asked = _request(procs, run_id, now, reason, cancel)
    if isinstance(asked, AbortResult):
        return asked
    run, leader = asked
    found = signals.terminate_group(leader.pid, leader.start, leader.pgid, grace_s)
    if found is identity.Ownership.RECYCLED:
        return _not_ours(procs, run, now)
    run = procs.get(run_id)
    deadline = time.monotonic() + WITNESS_WAIT_S
    while (detail := _settle_step(procs, data_dir, run, now, time.monotonic() >= deadline)) is None:
        time.sleep(WITNESS_POLL_S)
    return _report(procs, run_id, found, detail, reason)


async def abort_async(
    procs: RunMoves,
    data_dir: Path,
    run_id: str,
    now: datetime,
    *,
    grace_s: float = DEFAULT_GRACE_S,
    reason: str = "aborted on request",
    cancel: bool = True,
) -> AbortResult:
    """:func:`abort` for the event loop: the same checks, but no thread waits out the grace.

    Signals and the wait for the group happen on the event loop (the leader's
    pidfd wakes it); each look at the store is a short hop to a worker thread.
    """
    import asyncio

    asked = await asyncio.to_thread(_request, procs, run_id, now, reason, cancel)
    if isinstance(asked, AbortResult):
        return asked
    run, leader = asked
    found = await signals.terminate_group_async(leader.pid, leader.start, leader.pgid, grace_s)
    if found is identity.Ownership.RECYCLED:
        return await asyncio.to_thread(_not_ours, procs, run, now)
    run = await asyncio.to_thread(procs.get, run_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WITNESS_WAIT_S
    while True:
        give_up = loop.time() >= deadline
        detail = await asyncio.to_thread(_settle_step, procs, data_dir, run, now, give_up)
        if detail is not None:
            break
        await asyncio.sleep(WITNESS_POLL_S)
    return await asyncio.to_thread(_report, procs, run_id, found, detail, reason)


@dataclass(frozen=True, slots=True)
class _Leader:
    """The recorded leader of a run's process group."""

    pid: int
    start: str
    pgid: int


def _request(
    procs: RunMoves, run_id: str, now: datetime, reason: str, cancel: bool
) -> tuple[ProcRun, _Leader] | AbortResult:
    """Check the run may be signalled from here and record the request.

    The run and its group's leader, or the answer when there is nothing to signal.
    """
    run = procs.get(run_id)
    if run.status.ended:
        return AbortResult(AbortOutcome.ALREADY_EXITED, run, f"already {run.status.value}")
    if run.host != identity.host():
        raise Conflict(f"process run {run_id} runs on host {run.host}: abort it there")
    if run.pid is None or run.pid_start is None or run.pgid is None:
        raise Conflict(f"process run {run_id} has not reported its process yet; try again")
    seen = identity.ownership(run.host, run.boot_id, run.pid, run.pid_start)
    if seen is identity.Ownership.UNKNOWN:
        # Unknown is not gone: neither signal it blind nor settle it as lost.
        raise Conflict(
            f"process run {run_id}'s process cannot be seen from here (its /proc entry is "
            "hidden from this user): abort it as a user who can see it"
        )
    procs.request_abort(run_id, now, reason, cancel=cancel)
    return run, _Leader(run.pid, run.pid_start, run.pgid)


def _report(
    procs: RunMoves, run_id: str, found: identity.Ownership, detail: str, reason: str
) -> AbortResult:
    outcome = AbortOutcome.SIGNALED if found is identity.Ownership.OURS else None
    log.info(
        "Abort of process run %s: %s (%s) because %s",
        run_id,
        (outcome or AbortOutcome.ALREADY_EXITED).value,
        detail,
        reason,
        extra={"action": "proc_abort"},
    )
    return AbortResult(outcome or AbortOutcome.ALREADY_EXITED, procs.get(run_id), detail)


def _not_ours(procs: RunMoves, run: ProcRun, now: datetime) -> AbortResult:
    reason = (
        f"its pid {run.pid} now belongs to another process: the run's own process is gone; "
        "nothing was signaled"
    )
    settle.as_gone(procs, run, reason, now)
    log.warning(
        "Abort of process run %s refused: %s", run.run_id, reason, extra={"action": "proc_abort"}
    )
    return AbortResult(AbortOutcome.NOT_OURS, procs.get(run.run_id), reason)


def _settle_step(
    procs: RunMoves, data_dir: Path, run: ProcRun, now: datetime, give_up: bool
) -> str | None:
    """Record how the run ended, from the witness the shim writes, or as gone without one.

    ``None`` while the shim was alive when the witness was looked for, so it may
    be writing it right now (look again soon), unless ``give_up``.
    """
    if run.status.ended:
        return f"already {run.status.value}"
    # The shim writes the witness, then exits: look at the shim before the witness. A witness
    # missing while the shim lived may still come; one missing after it had gone never will.
    shim = identity.ownership(run.host, run.boot_id, run.shim_pid, run.shim_start)
    try:
        found = settle.read_witness(data_dir, run, procs, now)
    except witness.WitnessCorrupt as exc:
        settle.as_gone(procs, run, f"its witness is unreadable: {exc}", now)
        return str(exc)
    if found is not None:
        settle.from_witness(procs, run, found, now)
        return settle.describe(found)
    if shim is identity.Ownership.OURS and not give_up:
        return None
    reason = "its process is gone without a witness"
    settle.as_gone(procs, run, reason, now)
    return reason
