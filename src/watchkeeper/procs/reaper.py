"""Reaping: the engine settles what it started, on every sweep and on demand.

For each active run of this engine (this host, this data folder): a witness
ends it as the witness says; an owner (the shim) that is genuinely gone
without a witness makes it stale, and stale runs are reclaimed (failed with
the reason, leftovers of its group killed); a live run past its ``--timeout``
is aborted; a growing log is recorded as progress. Runs of other hosts, or of
another data folder on this host, are left to their own engines: their files
are not in this folder, so their absence here says nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.errors import WatchkeeperError
from watchkeeper.procs import abort, identity, layout, settle, signals, start_claim, witness
from watchkeeper.records.procs import ProcRun, Started

if TYPE_CHECKING:
    from watchkeeper.procs.moves import RunMoves

log = logging.getLogger(__name__)
#: A ``starting`` record with no owner this long after it was written never started.
START_GRACE_S = 60.0
STALE = "stale"
EXITED = "exited"
#: A run of this engine whose owner may be alive but cannot be seen (``/proc`` hidden from us).
UNKNOWN = "unknown"


@dataclass
class ReapReport:
    """What one reaping pass did, by run id."""

    collected: list[str] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)
    timed_out: list[str] = field(default_factory=list)
    progressed: list[str] = field(default_factory=list)


def shim_ownership(run: ProcRun) -> identity.Ownership:
    """Whether the run's owner (its shim) is alive, gone, or cannot be told."""
    return identity.ownership(run.host, run.boot_id, run.shim_pid, run.shim_start)


def effective_status(run: ProcRun, data_dir: Path, procs: RunMoves) -> str:
    """The status as it really is: ``stale`` for a run left active whose process is gone.

    ``exited`` means the shim's witness is there and the engine has not read it
    yet (a forged one does not count); ``unknown`` that its owner, recorded on
    this host, cannot be seen from here.
    """
    if run.status.ended:
        return run.status.value
    if settle.has_witness(data_dir, run, procs):
        return EXITED
    owner = shim_ownership(run)
    if owner in (identity.Ownership.GONE, identity.Ownership.RECYCLED):
        return STALE
    if owner is identity.Ownership.UNKNOWN and run.host == identity.host():
        if _never_started(run):
            return STALE
        if run.shim_pid is not None and run.shim_start is not None:
            return UNKNOWN
    return run.status.value


def _never_started(run: ProcRun) -> bool:
    return run.shim_pid is None and run.boot_id is not None and run.boot_id != identity.boot_id()


def reap(
    procs: RunMoves, data_dir: Path, now: datetime, *, grace_s: float = abort.DEFAULT_GRACE_S
) -> ReapReport:
    """One pass over the active runs of the engine of ``data_dir``.

    One run's failure never stops the others.
    """
    report = ReapReport()
    for run in procs.active_on(identity.engine_key(data_dir)):
        try:
            _reap_one(procs, data_dir, run, now, grace_s, report)
        except (WatchkeeperError, OSError) as exc:
            log.warning(
                "Could not reap process run %s: %s",
                run.run_id,
                exc,
                exc_info=True,
                extra={"action": "proc_reap"},
            )
    return report


def _reap_one(
    procs: RunMoves,
    data_dir: Path,
    run: ProcRun,
    now: datetime,
    grace_s: float,
    report: ReapReport,
) -> None:
    if run.shim_pid is None:
        adopted = _adopt_owner(procs, data_dir, run, now)
        if adopted is None:
            _starting_without_owner(procs, data_dir, run, now, report)
            return
        run = adopted
    owner = shim_ownership(run)  # before the witness: a shim writes it, then exits
    try:
        found = settle.read_witness(data_dir, run, procs, now)
    except witness.WitnessCorrupt as exc:
        if owner in (identity.Ownership.GONE, identity.Ownership.RECYCLED):
            _reclaim(procs, run, f"its witness is unreadable: {exc}", now, report)
        return
    if found is not None:
        if settle.from_witness(procs, run, found, now):
            report.collected.append(run.run_id)
        return
    if owner in (identity.Ownership.GONE, identity.Ownership.RECYCLED):
        _reclaim(procs, run, "its process is gone without a witness (the shim died)", now, report)
        return
    if owner is identity.Ownership.OURS:
        _watch_live(procs, data_dir, run, now, grace_s, report)
    # An owner we cannot see is left as it is: unknown is not dead.


def _adopt_owner(procs: RunMoves, data_dir: Path, run: ProcRun, now: datetime) -> ProcRun | None:
    """The launcher died after the shim started: take the owner from ``owner.json``."""
    try:
        raw = json.loads(layout.owner_path(data_dir, run.run_id).read_bytes())
        started = Started(
            int(raw["shim_pid"]),
            str(raw["shim_start"]),
            int(raw["pid"]),
            str(raw["pid_start"]),
            int(raw["pgid"]),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning(
            "Unreadable owner file of process run %s: %s",
            run.run_id,
            exc,
            extra={"action": "proc_reap"},
        )
        return None
    procs.mark_started(run.run_id, started, now)
    return procs.get(run.run_id)


def _starting_without_owner(
    procs: RunMoves, data_dir: Path, run: ProcRun, now: datetime, report: ReapReport
) -> None:
    folder = layout.run_dir(data_dir, run.run_id)
    claim = start_claim.read(str(folder))
    if witness.exists(folder):
        # No owner was recorded: the shim named in its start claim wrote the witness (it could
        # not start the command), and its word is final once that shim has gone.
        gone = _claimed_shim(run, claim) in (identity.Ownership.GONE, identity.Ownership.RECYCLED)
        found = settle.read_witness(data_dir, run, procs, now, gone=gone)
        if found is not None:
            if settle.from_witness(procs, run, found, now):
                report.collected.append(run.run_id)
            return
    if claim is None:
        if not (_never_started(run) or (now - run.created_at).total_seconds() > START_GRACE_S):
            return  # its launcher may still be starting it
        why = "it never started: the launcher stopped before the command ran"
        if folder.is_dir():
            claim = start_claim.take(str(folder), start_claim.by_engine(why))
        if claim is None:  # the engine's claim won: no shim will start the command now
            _reclaim(procs, run, why, now, report)
            return
    if declined := claim.get("declined"):
        said_by_shim = claim.get("by") == start_claim.SHIM
        _reclaim(
            procs,
            run,
            f"it never started: {declined}" if said_by_shim else str(declined),
            now,
            report,
        )
        return
    shim = _claimed_shim(run, claim)
    if shim in (identity.Ownership.GONE, identity.Ownership.RECYCLED):
        _reclaim(procs, run, "its shim died while starting the command", now, report)
    # Otherwise the shim is starting the command: its owner report comes next.


def _claimed_shim(run: ProcRun, claim: dict[str, object] | None) -> identity.Ownership:
    """Whether the shim that took the run's start claim lives; unknown without one."""
    if claim is None or claim.get("by") != start_claim.SHIM:
        return identity.Ownership.UNKNOWN
    pid, start = _int(claim.get("pid")), _str(claim.get("start"))
    return identity.ownership(run.host, run.boot_id, pid, start)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _reclaim(procs: RunMoves, run: ProcRun, reason: str, now: datetime, report: ReapReport) -> None:
    # The shim is gone, but what it started may not be: the engine owns it, so end it.
    if run.pid is not None and run.pid_start is not None and run.pgid is not None:
        child = identity.ownership(run.host, run.boot_id, run.pid, run.pid_start)
        if child is identity.Ownership.OURS:
            signals.terminate_group(run.pid, run.pid_start, run.pgid, grace_s=1.0)
            reason += "; its leftover processes were killed"
    if settle.as_gone(procs, run, reason, now):
        report.reclaimed.append(run.run_id)


def _watch_live(
    procs: RunMoves,
    data_dir: Path,
    run: ProcRun,
    now: datetime,
    grace_s: float,
    report: ReapReport,
) -> None:
    started = run.started_at or run.created_at
    if run.timeout_s is not None and (now - started).total_seconds() > run.timeout_s:
        reason = f"timed out after {run.timeout_s:g} s"
        abort.abort(procs, data_dir, run.run_id, now, grace_s=grace_s, reason=reason, cancel=False)
        report.timed_out.append(run.run_id)
        return
    try:
        stat = layout.log_path(data_dir, run.run_id).stat()
    except FileNotFoundError:
        return
    if (stat.st_size, stat.st_mtime) == (run.log_size, run.log_mtime):
        return
    # The first look only sets the baseline, unless the log already has something in it.
    progressed = run.log_mtime is not None or stat.st_size != run.log_size
    if procs.observe_log(run.run_id, stat.st_size, stat.st_mtime, now, progressed=progressed) and (
        progressed
    ):
        report.progressed.append(run.run_id)
