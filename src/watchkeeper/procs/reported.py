"""Runs this host starts while a server records them: the host's side.

When the command line talks to a server, ``watchkeeper run`` still runs the command
here, under an engine of this host's own: its store and the runs' files are in this
user's state folder, one folder per server (:func:`reporting_dir`), never in the
folder the command was typed in. The run is recorded on the server before its
command starts (:meth:`Reporter.announce`: if the server does not take it, nothing
starts). From then on this engine settles the run as any engine settles its own
(witness, timeout, a shim gone) and reports it to the server, as a runner reports
its tasks (:meth:`Reporter.sync`): its owner once the shim reported it, its output as
the log grows, and its end once the witness was read and every byte of output sent.
The server's sweep then judges it like any process run (its side:
:mod:`watchkeeper.procs.mirror`).

A relay process (:mod:`watchkeeper.procs.relay`) reports while runs go on; a
foreground ``run`` reports its own end before it exits, and ``reclaim`` reports
whatever was left. The witness key never leaves this host.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from watchkeeper.client.procs import ENDED
from watchkeeper.client.wire import TOKEN_ENV, URL_ENV
from watchkeeper.clock import rfc3339
from watchkeeper.errors import ClientError
from watchkeeper.paths import DATABASE_FILE
from watchkeeper.procs import layout, mirror
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.procs.reaper import ReapReport
from watchkeeper.records.procs import ProcRun

if TYPE_CHECKING:
    from watchkeeper.client import Client
    from watchkeeper.procs.engine import ProcEngine

log = logging.getLogger(__name__)
#: Where this user's state lives (the XDG base directory), else ``~/.local/state``.
STATE_ENV = "XDG_STATE_HOME"
#: A file in a run's folder once the server has its end and all its output.
REPORTED_MARK = "reported"
#: Most output one report carries (the server takes 96 KiB).
PIECE_BYTES = 64 * 1024
#: Most reports one sync sends for one run, so one chatty run holds up no other.
SENDS_PER_SYNC = 16
#: How long a foreground ``run`` tries to report its end before it says it could not.
FINAL_REPORT_S = 30.0
#: Answers that the same report would get again: the run is marked, and no longer sent.
_REFUSED = frozenset({400, 404, 409, 413, 422})


def reporting_dir(url: str) -> Path:
    """The data folder of this host's runs that the server at ``url`` records."""
    base = os.environ.get(STATE_ENV) or str(Path.home() / ".local" / "state")
    where = urlsplit(url)
    name = re.sub(r"[^A-Za-z0-9.]+", "-", f"{where.hostname or 'server'}-{where.port or ''}")
    digest = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:12]
    return Path(base) / "watchkeeper" / "servers" / f"{name.strip('-')}-{digest}"


def open_engine(data_dir: Path) -> ProcEngine:
    """This host's engine of the runs in ``data_dir`` (made on first use)."""
    from watchkeeper.procs.engine import ProcEngine
    from watchkeeper.store.procs import open_store

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LaunchFailed(
            f"cannot create {data_dir} for this host's runs: {exc.strerror}; "
            f"set {STATE_ENV} to a folder you may write"
        ) from None
    return ProcEngine(open_store(f"sqlite:///{data_dir / DATABASE_FILE}"), data_dir)


def start_relay(data_dir: Path, url: str, token: str | None) -> None:
    """Start the relay that reports the runs of ``data_dir`` to ``url`` (it leaves at once
    if one already does), in a session of its own: nothing of it is the caller's."""
    env = {**os.environ, URL_ENV: url}
    if token:
        env[TOKEN_ENV] = token
    with (data_dir / "relay.log").open("ab") as errors:
        subprocess.Popen(
            [sys.executable, "-m", "watchkeeper.procs.relay", str(data_dir)],
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )


@dataclass(frozen=True, slots=True)
class Synced:
    """Where the server stands on one run after a sync."""

    #: The server has the run's end.
    ended: bool
    #: The server has every byte of the run's output written so far.
    caught_up: bool
    #: Somebody asked the server to end the run.
    abort_requested: bool


@dataclass(frozen=True, slots=True)
class Left:
    """What a pass over the runs left to do."""

    active: int
    unreported: int
    #: The last report the server did not take (it is tried again on the next pass).
    error: ClientError | None = None
    #: What settling the runs here did first.
    reaped: ReapReport = field(default_factory=ReapReport)


class Reporter:
    """Reports the runs of ``engine`` (this host's) to the server of ``client``."""

    def __init__(self, client: Client, engine: ProcEngine) -> None:
        self.client = client
        self.engine = engine
        self._offsets: dict[str, int] = {}
        #: Per run: when it was last reported (monotonic) and what was said of its state.
        self._said: dict[str, tuple[float, tuple[Any, ...]]] = {}

    def announce(self, run: ProcRun) -> None:
        """Record ``run`` on the server before its command starts."""
        self.client.procs.record_reported(
            {
                "id": run.run_id,
                "name": run.name,
                "argv": list(run.argv),
                "cwd": run.cwd,
                "host": run.host,
                "user": run.user,
                "boot_id": run.boot_id,
                "detach": run.detach,
                "budget_s": run.budget_s,
                "timeout_s": run.timeout_s,
                "origin": run.origin,
                "session": run.session,
                "engine_key": self.engine.engine_key,
            }
        )

    def reported(self, run: ProcRun) -> bool:
        """Whether the server has the end of ``run`` and all its output."""
        return (layout.run_dir(self.engine.data_dir, run.run_id) / REPORTED_MARK).exists()

    def due(self, run: ProcRun, now: float) -> bool:
        """Whether ``run`` has news for the server, or its engine is due to say it is here."""
        said = self._said.get(run.run_id)
        if said is None or said[1] != _state(run):
            return True
        if self._offsets.get(run.run_id, 0) < _size(self._log(run)):
            return True
        return now - said[0] >= mirror.REPORT_EVERY_S

    def sync(self, run: ProcRun) -> Synced:
        """Send the server what it lacks of ``run``: its owner, output, end (the end only
        once all the output is there). Raises :class:`ClientError` when it cannot."""
        log_file = self._log(run)
        offset = self._offsets.get(run.run_id)
        answer: dict[str, Any] = {}
        for _ in range(SENDS_PER_SYNC):
            size = _size(log_file)
            piece = b"" if offset is None or offset >= size else _read(log_file, offset)
            complete = offset is not None and offset + len(piece) >= size
            answer = self.client.procs.report(
                run.run_id,
                self.engine.engine_key,
                started=_started(run),
                output=None if offset is None or not piece else (offset, piece),
                ended=_ended(run) if run.status.ended and complete else None,
            )
            offset = self._offsets[run.run_id] = int(answer["next_offset"])
            more = offset < _size(log_file)
            if not more and (answer["status"] in ENDED or not run.status.ended):
                break
        self._said[run.run_id] = (time.monotonic(), _state(run))
        synced = Synced(
            answer["status"] in ENDED,
            offset is not None and offset >= _size(log_file),
            bool(answer["abort_requested"]),
        )
        if run.status.ended and synced.ended and synced.caught_up:
            self._mark(run, "the server has its end and all its output")
        return synced

    def pass_over(self) -> Left:
        """Settle this engine's runs, then report each that has news; act on aborts asked.

        A run the server does not know, or whose report it refuses as it is, is marked
        and left: nothing said again would change that.
        """
        reaped = self.engine.reap()
        now = time.monotonic()
        active = unreported = 0
        error = None
        for run in self.engine.runs(include_finished=True):
            if run.status.ended and self.reported(run):
                continue
            active += not run.status.ended
            unreported += run.status.ended
            if not self.due(run, now):
                continue
            try:
                synced = self.sync(run)
            except ClientError as exc:
                if exc.status not in _REFUSED:
                    error = exc  # no answer, or one that may change: asked again next pass
                    continue
                log.warning("The server refused the report of %s: %s", run.run_id, exc)
                self._mark(run, f"not reported: {exc.message}")
                unreported -= run.status.ended
                continue
            unreported -= run.status.ended and synced.ended and synced.caught_up
            if synced.abort_requested and not run.status.ended:
                self.engine.abort(run.run_id)
        return Left(active, unreported, error, reaped)

    def report_end(self, run_id: str) -> None:
        """Report a run that just ended until the server has its end and all its output
        (a foreground ``run``); raises :class:`ClientError` if it still cannot after
        :data:`FINAL_REPORT_S`."""
        deadline = time.monotonic() + FINAL_REPORT_S
        while True:
            run = self.engine.get(run_id)
            try:
                self.sync(run)
            except ClientError:
                if time.monotonic() >= deadline:
                    raise
            else:
                if self.reported(run) or time.monotonic() >= deadline:
                    return
            time.sleep(0.2)

    def _log(self, run: ProcRun) -> Path:
        return layout.log_path(self.engine.data_dir, run.run_id)

    def _mark(self, run: ProcRun, why: str) -> None:
        mark = layout.run_dir(self.engine.data_dir, run.run_id) / REPORTED_MARK
        try:
            mark.write_text(why + "\n", encoding="utf-8")
        except OSError as exc:
            log.warning("Could not mark process run %s reported: %s", run.run_id, exc)


def _state(run: ProcRun) -> tuple[Any, ...]:
    return (run.status, run.shim_pid, run.exit_code, run.signal, run.abort_requested_at)


def _started(run: ProcRun) -> dict[str, Any] | None:
    if run.shim_pid is None or run.shim_start is None or run.pid is None:
        return None
    if run.pid_start is None or run.pgid is None:
        return None
    return {
        "shim_pid": run.shim_pid,
        "shim_start": run.shim_start,
        "pid": run.pid,
        "pid_start": run.pid_start,
        "pgid": run.pgid,
    }


def _ended(run: ProcRun) -> dict[str, Any]:
    return {
        "status": run.status.value,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "reason": run.reason,
        "finished_at": rfc3339(run.finished_at),
    }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, offset: int) -> bytes:
    with path.open("rb") as file:
        file.seek(offset)
        return file.read(PIECE_BYTES)
