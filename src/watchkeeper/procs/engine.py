"""The process engine in one object: what the CLI, the API and the sweeper call.

``ProcEngine`` holds the procs store, the data folder and the clock, and
wires the small modules together: :mod:`launch`, :mod:`abort`,
:mod:`reaper`, :mod:`hooks` and :mod:`park`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import select
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper.clock import Now, to_epoch, utcnow
from watchkeeper.errors import Conflict
from watchkeeper.procs import abort as aborting
from watchkeeper.procs import (
    containment,
    hooks,
    identity,
    launch,
    layout,
    mirror,
    reaper,
    signals,
    witness,
)
from watchkeeper.procs import park as parking
from watchkeeper.records.procs import AbortOutcome, HookState, NewProc, Park, ParkState, ProcRun

if TYPE_CHECKING:
    from watchkeeper.config import ForgeConfig, Settings
    from watchkeeper.store import Store
    from watchkeeper.store.procs import ProcStore

log = logging.getLogger(__name__)
#: A ``firing`` hook older than this belongs to an engine that stopped mid-fire.
FIRING_STALE_S = hooks.HOOK_TIMEOUT_S + 15.0
FINISHED_WINDOW = timedelta(days=1)
#: Longest an async wait trusts a live shim's pidfd before looking at the run again
#: (another process may have settled it without the shim exiting).
WAIT_RECHECK_S = 5.0


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What one engine sweep did."""

    reaped: reaper.ReapReport
    hooks: list[tuple[str, HookState]]
    wakes: list[tuple[int, ParkState]]


class ProcEngine:
    """Starts, watches, aborts and settles the processes watchkeeper owns."""

    def __init__(
        self,
        store: Store,
        data_dir: Path,
        *,
        clock: Now = utcnow,
        hook_secret: str | None = None,
        grace_s: float = aborting.DEFAULT_GRACE_S,
        forge: ForgeConfig | None = None,
    ) -> None:
        from watchkeeper.store.procs import ProcStore

        self.store = store
        self.procs: ProcStore = ProcStore(store.engine)
        self.data_dir = data_dir
        # Which runs are this engine's to settle: this host's, of this data folder.
        self.engine_key = identity.engine_key(data_dir)
        self.clock = clock
        self.grace_s = grace_s
        self._configured_secret = hook_secret
        self.forge = forge
        # The look at each run under way for async waiters (see refresh_async).
        self._looks: dict[str, asyncio.Task[ProcRun]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, store: Store, clock: Now = utcnow) -> ProcEngine:
        """The engine of a configured watchkeeper."""
        return cls(
            store,
            settings.data_dir,
            clock=clock,
            hook_secret=settings.ops.webhook_secret,
            forge=settings.forge,
        )

    @classmethod
    def open(cls, settings: Settings) -> ProcEngine:
        """The engine of one command: it opens (and closes) the store itself.

        Commands that start processes pay for every millisecond, so the store is
        migrated only when it is behind the shipped schema.
        """
        from watchkeeper.store.procs import open_store

        return cls.from_settings(settings, open_store(settings.resolved_database_url))

    def close(self) -> None:
        """Release the store's connections (for an engine made by :meth:`open`)."""
        self.store.close()

    # Starting -------------------------------------------------------------------------

    def start(
        self,
        request: launch.LaunchRequest,
        *,
        tee: bool = False,
        announce: launch.Announce | None = None,
    ) -> launch.Launched:
        """Register, then start; see :func:`watchkeeper.procs.launch.launch` (``announce``
        is told of the run once recorded, before the command starts).

        A run from GitHub labels its issue waiting first, so the label never lands
        after the run's end has replaced it.
        """

        def start() -> launch.Launched:
            return launch.launch(
                self.procs, self.data_dir, request, self.clock, tee=tee, announce=announce
            )

        if not (request.origin and request.origin.get("platform") == "github"):
            return start()
        from watchkeeper.procs import github_results  # its HTTP client only when needed

        return github_results.GitHubResults(self.forge).start_labelled(
            self.data_dir, request, start
        )

    def finish_foreground(self, launched: launch.Launched) -> ProcRun:
        """Wait for a foreground run's shim, then settle the run from its witness."""
        launch.wait_foreground(launched)
        self.reap()
        return self.procs.get(launched.run.run_id)

    # Reading --------------------------------------------------------------------------

    def get(self, run_id: str) -> ProcRun:
        """One run."""
        return self.procs.get(run_id)

    def effective_status(self, run: ProcRun) -> str:
        """The run's status as it really is (``stale``, ``exited`` included).

        A reported run is as its engine last said, ``stale`` once that engine went silent.
        """
        if run.reported and not run.status.ended:
            return run.status.value if self.alive(run) else reaper.STALE
        return reaper.effective_status(run, self.data_dir, self.procs)

    def alive(self, run: ProcRun) -> bool | None:
        """Whether the run's owner is alive; ``None`` when that cannot be told.

        A reported run's owner is the engine that reports it, alive while it speaks.
        """
        if run.status.ended:
            return False
        if run.reported:
            return mirror.reporter_alive(run, self.clock())[0]
        return identity.alive(reaper.shim_ownership(run))

    def runs(self, *, include_finished: bool = False, limit: int = 500) -> list[ProcRun]:
        """Active runs, and (``include_finished``) those ended in the last day."""
        since = self.clock() - FINISHED_WINDOW
        return self.procs.runs(active_only=not include_finished, finished_since=since, limit=limit)

    def describe(self, run: ProcRun) -> dict[str, Any]:
        """A run as the API and ``status`` show it."""
        body = run.as_dict()
        body["effective_status"] = self.effective_status(run)
        body["alive"] = self.alive(run)
        body["log_path"] = str(layout.log_path(self.data_dir, run.run_id))
        body.update(self._containment(run))
        return body

    def _containment(self, run: ProcRun) -> dict[str, Any]:
        """How the run's process tree is held, and what its shim ended after the leader.

        Once the run ended, from the record its shim signed; while it runs, from
        its ``owner.json`` (``None`` for a run started before shims recorded it).
        """
        folder = str(layout.run_dir(self.data_dir, run.run_id))
        key = self.procs.witness_key(run.run_id)
        record = containment.read(folder, run.run_id, key)
        if record is not None:
            return {
                "containment": record.get("containment"),
                "ended_descendants": record.get("ended", []),
            }
        kind = None
        with contextlib.suppress(OSError, ValueError, AttributeError):
            kind = json.loads((Path(folder) / witness.OWNER_NAME).read_text()).get("containment")
        return {"containment": kind, "ended_descendants": []}

    def status(self, run_id: str) -> dict[str, Any]:
        """One run as ``status`` shows it: a read, which settles, kills and fires nothing.

        A stale run is shown ``stale`` and left for the sweep or ``reclaim``:
        settling is theirs, so what a look shows is what the record holds.
        """
        return self.describe(self.procs.get(run_id))

    def log_path(self, run_id: str) -> Path:
        """The run's log file (it exists once the shim started)."""
        self.procs.get(run_id)
        return layout.log_path(self.data_dir, run_id)

    def follow(self, run_id: str, *, poll_s: float = 0.25) -> Iterator[bytes]:
        """The log from the start, then what is appended, until the run ends."""
        path = self.log_path(run_id)
        with path.open("rb") as file:
            while True:
                chunk = file.read(65536)
                if chunk:
                    yield chunk
                    continue
                run = self.refresh(run_id)
                if run.status.ended:
                    yield file.read()
                    return
                time.sleep(poll_s)

    # Moving ---------------------------------------------------------------------------

    def progress(self, run_id: str, step: str | None = None) -> ProcRun:
        """An explicit progress report for an active run."""
        return self.procs.progress(run_id, self.clock(), step)

    def abort(self, run_id: str, *, grace_s: float | None = None) -> aborting.AbortResult:
        """Abort a run after checking it is ours; see :func:`watchkeeper.procs.abort.abort`.

        A reported run is ended by the engine that reports it: the request is recorded
        for it to read in its next report's answer, and its end is waited for.
        """
        grace = self.grace_s if grace_s is None else grace_s
        run = self.procs.get(run_id)
        if run.reported:
            asked = self._ask_reporter_to_abort(run)
            if asked:
                run = self.wait(run_id, timeout_s=_reporter_abort_s(grace))
            return _ended_by_reporter(run, asked, grace)
        result = aborting.abort(self.procs, self.data_dir, run_id, self.clock(), grace_s=grace)
        if result.outcome is not AbortOutcome.SIGNALED:
            self._fire_hooks(self.clock())
        return result

    async def abort_async(
        self, run_id: str, *, grace_s: float | None = None
    ) -> aborting.AbortResult:
        """:meth:`abort` for the event loop: no thread is held while the group has its grace."""
        grace = self.grace_s if grace_s is None else grace_s
        run = await asyncio.to_thread(self.procs.get, run_id)
        if run.reported:
            asked = await asyncio.to_thread(self._ask_reporter_to_abort, run)
            if asked:
                run = await self.wait_async(run_id, timeout_s=_reporter_abort_s(grace))
            return _ended_by_reporter(run, asked, grace)
        result = await aborting.abort_async(
            self.procs, self.data_dir, run_id, self.clock(), grace_s=grace
        )
        if result.outcome is not AbortOutcome.SIGNALED:
            await asyncio.to_thread(self._fire_hooks, self.clock())
        return result

    def _ask_reporter_to_abort(self, run: ProcRun) -> bool:
        """Record the abort a reported run's engine reads; ``False`` if it had ended."""
        if run.status.ended:
            return False
        self.procs.request_abort(run.run_id, self.clock(), "aborted on request", cancel=True)
        return True

    def refresh(self, run_id: str) -> ProcRun:
        """Settle this engine's runs now if this one's witness is there or its owner is gone.

        For those that wait on a run (``wait``, ``logs -f``, a runner holding it),
        which must see it end even with no sweep running; never for a look at it
        (:meth:`status`).
        """
        run = self.procs.get(run_id)
        if not run.status.ended and run.host == identity.host():
            self.reap()
            run = self.procs.get(run_id)
        return run

    def wait(self, run_id: str, *, timeout_s: float | None = None) -> ProcRun:
        """Block until the run has ended (or ``timeout_s`` passed); returns the run."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            run = self.refresh(run_id)
            if run.status.ended or (deadline is not None and time.monotonic() >= deadline):
                return run
            self._wait_a_little(run)

    def _wait_a_little(self, run: ProcRun) -> None:
        # Wake as soon as the shim exits (it writes the witness just before), else re-check.
        if run.host != identity.host() or run.shim_pid is None or run.reported:
            time.sleep(1.0)
            return
        try:
            with signals.pinned(run.shim_pid) as pidfd:
                if pidfd is None:
                    time.sleep(0.2)
                    return
                select.select([pidfd], [], [], 1.0)
        except ProcessLookupError:
            return  # already gone: the next refresh settles it

    async def wait_async(self, run_id: str, *, timeout_s: float) -> ProcRun:
        """:meth:`wait` for the event loop: the waiting holds no thread.

        A local run is waited on through its shim's pidfd (the shim writes the
        witness, then exits); anything else is looked at again every second.
        Each look at the store is a short hop to a worker thread.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        exited = False
        while True:
            run = await self.refresh_async(run_id)
            left = deadline - loop.time()
            if run.status.ended or left <= 0:
                return run
            if exited:  # the shim is gone but the run is not settled yet: never spin
                await asyncio.sleep(min(left, 0.2))
            exited = await self._pause_async(run, left)

    async def refresh_async(self, run_id: str) -> ProcRun:
        """:meth:`refresh` on a worker thread, one at a time per run: a waiter that comes
        while a look at its run is under way takes that look's answer.

        Sixty viewers waiting on one run then cost the store one look per round, not
        sixty, and leave the worker threads to the requests that are not waiting.
        """
        loop = asyncio.get_running_loop()
        looking = self._looks.get(run_id)
        if looking is None or looking.done() or looking.get_loop() is not loop:
            looking = loop.create_task(asyncio.to_thread(self.refresh, run_id))
            self._looks[run_id] = looking
            looking.add_done_callback(lambda done: self._forget_look(run_id, done))
        # Shielded: one waiter going away (its client hung up) never ends the others' look.
        return await asyncio.shield(looking)

    def _forget_look(self, run_id: str, done: asyncio.Task[ProcRun]) -> None:
        if self._looks.get(run_id) is done:
            del self._looks[run_id]
        if not done.cancelled():
            done.exception()  # read, so a look whose waiters all left logs no "never retrieved"

    async def _pause_async(self, run: ProcRun, left_s: float) -> bool:
        """Wait a little for the run to move; ``True`` when its shim is known to have exited."""
        if run.host != identity.host() or run.shim_pid is None or run.reported:
            await asyncio.sleep(min(left_s, 1.0))
            return False
        try:
            with signals.pinned(run.shim_pid) as pidfd:
                if pidfd is None:
                    await asyncio.sleep(min(left_s, 0.2))
                    return False
                return await signals.readable(pidfd, min(left_s, WAIT_RECHECK_S))
        except ProcessLookupError:
            return True  # already gone: the next refresh settles it

    # The engine's sweep ---------------------------------------------------------------

    def reconcile_startup(self) -> int:
        """At start-up: this engine's hooks left ``firing`` may have fired: ``maybe_fired``."""
        count = self.procs.reconcile_hooks(self.engine_key, self._firing_cutoff(self.clock()))
        if count:
            log.warning(
                "%d completion hook(s) were interrupted while firing: marked maybe_fired",
                count,
                extra={"action": "proc_hook_reconcile"},
            )
        return count

    def _firing_cutoff(self, now: datetime) -> float:
        cutoff = to_epoch(now - timedelta(seconds=FIRING_STALE_S))
        assert cutoff is not None
        return cutoff

    def reap(self) -> reaper.ReapReport:
        """Settle this engine's runs now (``watchkeeper reclaim``)."""
        now = self.clock()
        report = reaper.reap(self.procs, self.data_dir, now, grace_s=self.grace_s)
        self._fire_hooks(now)
        return report

    def _fire_hooks(self, now: datetime) -> list[tuple[str, HookState]]:
        secret = hooks.hook_secret(self.data_dir, self._configured_secret)
        return hooks.fire_due(
            self.procs, self.data_dir, secret, self.engine_key, now, forge=self.forge
        )

    def sweep(self, now: datetime) -> SweepReport:
        """The sweep hook: reap, fire due hooks, wake parked sessions."""
        if not self.procs.has_work(self.engine_key):
            return SweepReport(reaper.ReapReport(), [], [])
        reaped = reaper.reap(self.procs, self.data_dir, now, grace_s=self.grace_s)
        self.procs.reconcile_hooks(self.engine_key, self._firing_cutoff(now))
        fired = self._fire_hooks(now)
        wakes = parking.wake_due(self.procs, self.data_dir, now)
        return SweepReport(reaped, fired, wakes)

    # Runs other engines report --------------------------------------------------------

    def record_reported(self, new: NewProc, engine_key: str) -> ProcRun:
        """Record a run that the engine of ``engine_key`` (another command line's) starts
        and reports here; see :mod:`watchkeeper.procs.mirror`."""
        return mirror.record(self.procs, new, engine_key, self.clock())

    def take_report(self, run_id: str, said: mirror.Report) -> tuple[ProcRun, int]:
        """Apply a reporting engine's word on ``run_id``: the run now, and its log's size."""
        size = mirror.take(self.procs, self.data_dir, run_id, said, self.clock())
        return self.procs.get(run_id), size

    # Parking --------------------------------------------------------------------------

    def park(
        self,
        session: str,
        reason: str,
        until_run: str,
        *,
        wake_cmd: str | None = None,
        progress: str | None = None,
    ) -> Park:
        """Record that ``session`` handed back waiting on ``until_run``.

        ``progress`` says what the session achieved since it was last woken; it
        is recorded but resets no breaker (only the engine's own look does).
        """
        now = self.clock()
        if progress:
            self.procs.session_progress(session, progress, now)
        return self.procs.park(session, reason, until_run, wake_cmd, now)

    def session_progress(self, session: str, note: str | None = None) -> int:
        """Record the session's own progress note; releases no park, so returns 0."""
        return self.procs.session_progress(session, note, self.clock())

    def parked(self) -> list[parking.ParkedView]:
        """Every park with its run's state and its session's breaker."""
        return parking.views(self.procs)


def _reporter_abort_s(grace_s: float) -> float:
    """How long an abort waits for a reported run's engine to end it: its next report, the
    group's grace, the witness, and the report of the end."""
    return grace_s + aborting.WITNESS_WAIT_S + 3 * mirror.REPORT_EVERY_S


def _ended_by_reporter(run: ProcRun, asked: bool, grace_s: float) -> aborting.AbortResult:
    """The answer to an abort of a reported run once it ended, or the wait gave up."""
    if not asked:
        return aborting.AbortResult(AbortOutcome.ALREADY_EXITED, run, f"already {run.status.value}")
    if run.status.ended:
        how = run.reason or run.status.value
        return aborting.AbortResult(
            AbortOutcome.SIGNALED, run, f"ended by its engine on {run.host}: {how}"
        )
    raise Conflict(
        f"process run {run.run_id} runs on {run.host}, whose engine was asked to end it and "
        f"has not said it did within {_reporter_abort_s(grace_s):g} s: that engine may be "
        "gone (see `watchkeeper status`)"
    )
