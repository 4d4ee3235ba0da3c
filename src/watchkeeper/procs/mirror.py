"""A server's record of a run on another engine, which reports it: the server's side.

``watchkeeper run`` typed on a host that talks to a server runs the command on its
own host, under its own engine (the runs' files, witness and key stay there:
:mod:`watchkeeper.procs.reported`), and records the run on the server, as a runner
records its tasks there. The server keeps that record with the reporting engine's
key after :data:`~watchkeeper.records.procs.REPORTED_PREFIX`, so its own engine
never settles it; the reporting engine sends what its run did (:func:`take`): the
owner once the command started, the output as it grows (kept in the run's log in
the server's data folder, so ``logs`` and the sweep read it like any run's), and
the end, once every byte of output was sent.

Each report is also the reporter's word that it is still there: ``updated_at`` is
its last. A run whose reporter stays silent for :data:`REPORT_LEASE_S` counts as
having lost its owner (the sweep calls it stuck), whichever host it runs on.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from watchkeeper.errors import Conflict, NotFound
from watchkeeper.procs import layout
from watchkeeper.records.procs import REPORTED_PREFIX, NewProc, ProcRun, ProcStatus, Started

if TYPE_CHECKING:
    from watchkeeper.store.procs import ProcStore

#: How often a reporting engine speaks of each active run, at the least.
REPORT_EVERY_S = 2.0
#: A reported run whose engine said nothing this long has lost its owner.
REPORT_LEASE_S = 30.0
#: Appends to the logs of reported runs, one at a time: two reports of one piece keep it once.
_APPENDING = threading.Lock()


@dataclass(frozen=True, slots=True)
class Ended:
    """How a reported run ended, as its engine settled it from the witness."""

    status: ProcStatus
    exit_code: int | None
    signal: int | None
    reason: str | None
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class Report:
    """What a reporting engine says of one run: any of its owner, output and end."""

    engine_key: str
    started: Started | None = None
    output: tuple[int, bytes] | None = None
    ended: Ended | None = None


def record(procs: ProcStore, new: NewProc, engine_key: str, now: datetime) -> ProcRun:
    """Record ``new``, a run the engine of ``engine_key`` starts and reports; the same run
    again (a report whose answer was lost) is taken as it is."""
    key = REPORTED_PREFIX + engine_key
    try:
        found = procs.get(new.run_id)
    except NotFound:
        return procs.register(new, now, engine_key=key)
    if found.engine_key != key:
        raise Conflict(f"process run {new.run_id} is recorded already, by another engine")
    return found


def take(procs: ProcStore, data_dir: Path, run_id: str, said: Report, now: datetime) -> int:
    """Apply what a reporting engine ``said`` of ``run_id``; the size of its log here.

    Output is appended where it continues the log (a piece sent twice is kept once,
    one past a gap is left for the reporter to send again from the size answered).
    """
    run = procs.get(run_id)
    if not run.reported:
        raise Conflict(
            f"process run {run_id} runs under this server's own engine, which settles it; "
            "only a run recorded from another host takes reports"
        )
    if run.engine_key != REPORTED_PREFIX + said.engine_key:
        raise Conflict(f"process run {run_id} is reported by another engine")
    size = _append(layout.log_path(data_dir, run_id), *(said.output or (0, b"")))
    if said.output and said.output[1] and size > run.log_size:
        mtime = layout.log_path(data_dir, run_id).stat().st_mtime
        procs.observe_log(run_id, size, mtime, now, progressed=True)
    if said.started is not None and run.status is ProcStatus.STARTING:
        procs.mark_started(run_id, said.started, now)
    procs.heard_from(run_id, now)
    if said.ended is not None:
        ended = said.ended
        procs.finish(
            run_id,
            ended.status,
            now,
            exit_code=ended.exit_code,
            signal=ended.signal,
            reason=ended.reason,
            finished_at=ended.finished_at,
        )
    return size


def _append(path: Path, offset: int, data: bytes) -> int:
    """Append what of ``data`` (starting at byte ``offset``) continues the file; its size."""
    with _APPENDING:
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = 0
        if data and offset <= size < offset + len(data):
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("ab") as log:
                log.write(data[size - offset :])
            size = offset + len(data)
        return size


def reporter_alive(run: ProcRun, now: datetime) -> tuple[bool, datetime]:
    """Whether a reported run's engine still speaks of it, and until when that counts."""
    until = run.updated_at + timedelta(seconds=REPORT_LEASE_S)
    return now < until, until
