"""How a run ends in the store: from its witness, or as gone without one.

The witness is the only source of an exit code. A run whose owner is gone and
left no witness is failed with the reason, never succeeded on anybody's word.
Only the shim's word counts: a witness not signed with the run's key (the
command wrote it) is ignored, and the run is judged as if it had none.
"""

from __future__ import annotations

import logging
import signal as signals
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.clock import from_epoch
from watchkeeper.procs import layout, witness
from watchkeeper.records.procs import ProcRun, ProcStatus

if TYPE_CHECKING:
    from watchkeeper.procs.moves import RunMoves

log = logging.getLogger(__name__)
#: What a run whose folder holds a witness its shim did not sign says, until it ends.
FORGED_NOTE = "forged witness ignored: its folder holds a witness its shim did not sign"


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; the number itself when the platform has no name for it."""
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)


def describe(found: witness.Witness) -> str:
    """How the command ended, in words."""
    if found.error:
        return found.error
    if found.signal is not None:
        return f"killed by signal {found.signal} ({signal_name(found.signal)})"
    return f"exited with status {found.exit_code}"


def status_of(found: witness.Witness, aborted: bool) -> ProcStatus:
    """Succeeded on status 0; cancelled when an abort asked for the end; failed otherwise."""
    if found.succeeded:
        return ProcStatus.SUCCEEDED
    return ProcStatus.CANCELLED if aborted else ProcStatus.FAILED


def read_witness(
    data_dir: Path, run: ProcRun, procs: RunMoves, now: datetime
) -> witness.Witness | None:
    """The run's witness, or ``None``; raises :class:`witness.WitnessCorrupt`.

    A forged witness is ``None``: the first time it is seen, the run says so
    (:data:`FORGED_NOTE`) and a warning is logged.
    """
    try:
        return trusted_witness(data_dir, run, procs)
    except witness.WitnessForged as exc:
        if procs.note_forged(run.run_id, FORGED_NOTE, now):
            log.warning(
                "Ignored a forged witness of process run %s: %s",
                run.run_id,
                exc,
                extra={"action": "proc_forged_witness"},
            )
        return None


def trusted_witness(data_dir: Path, run: ProcRun, procs: RunMoves) -> witness.Witness | None:
    """The run's witness checked against its key; a read that records nothing.

    Raises :class:`witness.WitnessForged` or :class:`witness.WitnessCorrupt`.
    """
    key = procs.witness_key(run.run_id)
    return witness.read(layout.run_dir(data_dir, run.run_id), run.run_id, key)


def has_witness(data_dir: Path, run: ProcRun, procs: RunMoves) -> bool:
    """Whether the shim's witness (readable or not) is there; a forged one does not count."""
    try:
        return trusted_witness(data_dir, run, procs) is not None
    except witness.WitnessForged:
        return False
    except witness.WitnessCorrupt:
        return True


def from_witness(procs: RunMoves, run: ProcRun, found: witness.Witness, now: datetime) -> bool:
    """End ``run`` as its witness says; ``False`` if it had already ended."""
    aborted = run.abort_requested_at is not None
    reason = None if found.succeeded else describe(found)
    if run.reason and reason is not None:
        reason = f"{run.reason}: {reason}"  # why it was ended (abort, timeout), then how
    ended = from_epoch(found.ended_at)
    changed = procs.finish(
        run.run_id,
        status_of(found, aborted),
        now,
        exit_code=found.exit_code,
        signal=found.signal,
        reason=reason,
        finished_at=ended,
    )
    if changed and run.started_at is None and ended is not None:
        procs.set_started_at(run.run_id, run.created_at)
    if changed:
        log.info(
            "Process run %s ended: %s",
            run.run_id,
            reason or "succeeded",
            extra={"action": "proc_collect"},
        )
    return changed


def as_gone(procs: RunMoves, run: ProcRun, reason: str, now: datetime) -> bool:
    """Fail ``run`` whose owner is gone without a witness; ``False`` if already ended."""
    changed = procs.finish(run.run_id, ProcStatus.FAILED, now, reason=reason)
    if changed:
        log.warning(
            "Reclaimed process run %s: %s", run.run_id, reason, extra={"action": "proc_reclaim"}
        )
    return changed


def exit_status(exit_code: int | None, signal: int | None, status: str) -> int:
    """The exit status a shell would show for a run: the code, 128+signal, or 1 when unknown."""
    if exit_code is not None:
        return exit_code
    if signal is not None:
        return 128 + signal
    return 0 if status == "succeeded" else 1
