"""How a run ends in the store: from its witness, or as gone without one.

The witness is the only source of an exit code. A run whose owner is gone and
left no witness is failed with the reason, never succeeded on anybody's word.
Only the shim's word counts: a witness not signed with the run's key (the
command wrote it) is ignored, and the run is judged as if it had none.

A witness is believed only once the shim and the command it names have both
exited, each known by pid and start time (:mod:`watchkeeper.procs.identity`):
the shim writes it after reaping the command and exits right after, so until
then it is not the last word. A command that got hold of a signing key (a run
recorded before key pairs keeps a shared secret in the store; root may read
any process's memory) can therefore still not end its run while it runs: a
signed witness beside a live shim or command waits, and one left by a shim
that was killed under a live command is not believed at all (the run is
reclaimed as gone without a witness, its leftover processes killed).
"""

from __future__ import annotations

import logging
import signal as signals
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.clock import from_epoch
from watchkeeper.procs import identity, layout, witness
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


_ENDED = (identity.Ownership.GONE, identity.Ownership.RECYCLED)


def processes_gone(run: ProcRun) -> bool:
    """Whether the shim and the command recorded on ``run`` have both exited.

    Each is known by pid and start time: a pid now held by another process
    counts as gone. One that cannot be seen (another host, a hidden ``/proc``)
    is not gone, and a run that recorded neither has nothing known to be gone.
    """
    recorded = [(run.shim_pid, run.shim_start), (run.pid, run.pid_start)]
    known = [(pid, start) for pid, start in recorded if pid is not None and start is not None]
    return bool(known) and all(
        identity.ownership(run.host, run.boot_id, pid, start) in _ENDED for pid, start in known
    )


def believed_witness(
    run_dir: Path, run: ProcRun, key: str | None, *, gone: bool | None = None
) -> witness.Witness | None:
    """The witness in ``run_dir`` if it is believed: signed with ``key`` and final.

    Final means read once the run's shim and command had both exited
    (``gone``, looked at before the file is read when not given). ``None``
    when there is none, or while they run. Raises :class:`witness.WitnessForged`
    (not signed with ``key``) or :class:`witness.WitnessCorrupt`, whether final or not.
    """
    if gone is None:
        gone = processes_gone(run)  # first: a shim writes its witness, then exits
    found = witness.read(run_dir, run.run_id, key)
    return found if gone else None


def read_witness(
    data_dir: Path, run: ProcRun, procs: RunMoves, now: datetime, *, gone: bool | None = None
) -> witness.Witness | None:
    """The run's believed witness (:func:`believed_witness`), or ``None``.

    Raises :class:`witness.WitnessCorrupt`. A forged witness is ``None``: the
    first time it is seen, the run says so (:data:`FORGED_NOTE`) and a warning is logged.
    """
    try:
        return trusted_witness(data_dir, run, procs, gone=gone)
    except witness.WitnessForged as exc:
        if procs.note_forged(run.run_id, FORGED_NOTE, now):
            log.warning(
                "Ignored a forged witness of process run %s: %s",
                run.run_id,
                exc,
                extra={"action": "proc_forged_witness"},
            )
        return None


def trusted_witness(
    data_dir: Path, run: ProcRun, procs: RunMoves, *, gone: bool | None = None
) -> witness.Witness | None:
    """:func:`believed_witness` under the run's recorded key; a read that records nothing.

    Raises :class:`witness.WitnessForged` or :class:`witness.WitnessCorrupt`.
    """
    if gone is None:
        gone = processes_gone(run)
    key = procs.witness_key(run.run_id)
    return believed_witness(layout.run_dir(data_dir, run.run_id), run, key, gone=gone)


def has_witness(data_dir: Path, run: ProcRun, procs: RunMoves) -> bool:
    """Whether the shim's final witness (readable or not) is there; a forged one does not count.

    A signed witness whose shim or command still runs is not there yet.
    """
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
