"""The runner daemon: lease tasks of a fleet, run each as a subprocess, report the outcome.

It talks to the server over the HTTP API only (it may run on another host),
and runs each task's command through the ``procs/`` machinery on its own
host, recorded in a local store in its data folder. Three duties, each on its
own clock:

- heartbeat every ``heartbeat_s`` from a thread of its own, so a runner busy
  with long tasks never looks offline;
- renew each lease every ``renew_s`` (a third of the task's lease unless
  told), saying whether its output grew; a renewal answered ``lease_lost``
  (cancelled, lapsed, taken back) aborts the subprocess at once, so a cancel
  reaches the process within one renewal interval;
- stop each task's subprocess before the lease it could not renew lapses: the
  lease is counted, on the runner's own monotonic clock, from the moment the
  last renewal that went through was *sent* (the server counts from a later
  moment, never an earlier one), and the subprocess is aborted a margin before
  that end, from a thread of its own so a request hanging on a dead link cannot
  hold it back. So a task the server hands to another runner is never running
  here as well;
- lease up to its free capacity every ``poll_s`` while it has room.

Each task runs in a scrubbed environment (``queue/task_env.py``): never the
runner's own token, but one of its own that the lease answer carries, which
may only report timeline events about that task and ends with the lease.

A task's output goes to the server as it runs, then the rest and its tail
(``queue/shipping.py``), then its outcome; the timeline gets ``task_start`` as
its command starts and ``task_end`` (with the exit code) as it ends, sent with
the runner's own token. None may hold the outcome back: failures are logged.

A task's outcome is reported under its lease token; a report the server
cannot take (the lease is gone) is logged and dropped, never retried as if
it were ours. On stop, running subprocesses are aborted and the server takes
the leases back.

Given several replicas' URLs, the client is a
:class:`~watchkeeper.client.failover.FailoverClient`: a replica that dies
takes no lease with it, since the next renewal goes to another replica.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from watchkeeper.client.timeline import Timeline
from watchkeeper.clock import Clock, MonotonicClock
from watchkeeper.errors import ClientError, WatchkeeperError
from watchkeeper.procs import identity, layout
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.queue import report_batch
from watchkeeper.queue.held import EXPIRY_MARGIN, HeldTask
from watchkeeper.queue.lease_notes import LeaseNotes
from watchkeeper.queue.runner_options import RunnerOptions as RunnerOptions
from watchkeeper.queue.shipping import Shipment, Shipper
from watchkeeper.queue.task_env import task_env
from watchkeeper.records.procs import ProcStatus

if TYPE_CHECKING:
    from watchkeeper.client import Client
    from watchkeeper.client.failover import FailoverClient
    from watchkeeper.procs.engine import ProcEngine

log = logging.getLogger(__name__)
#: How often the loop looks at its subprocesses; their exit is noticed within this.
TICK_S = 0.05
#: The most tasks one lease request may ask for (the server refuses more).
LEASE_MAX = 100
#: How much of a failed start's run log the task's outcome carries.
START_LOG_TAIL = 600


class RunnerDaemon:
    """One executor daemon. ``run(stop)`` serves until ``stop`` is set.

    ``clock`` (monotonic unless given) schedules the polls and the renewals.
    """

    def __init__(
        self,
        client: Client | FailoverClient,
        options: RunnerOptions,
        engine: ProcEngine,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.engine = engine
        self.clock: Clock = clock or MonotonicClock()
        self.runner_id: str | None = None
        self.held: dict[str, HeldTask] = {}
        self._next_poll = 0.0
        #: Outcomes go with the next lease; off for a server that predates that.
        self._combine = True
        self._expiry = threading.Lock()
        self._timeline = Timeline(client)
        self._shipper = Shipper(client, options.poll_s)
        self._notes = LeaseNotes()  # why a lease came back empty, said once a change
        # Calls failing now: an outage is told once when it starts and once when it ends, not
        # at every poll or beat while it lasts.
        self._failing: set[str] = set()

    @classmethod
    def open(
        cls, client: Client | FailoverClient, options: RunnerOptions, clock: Clock | None = None
    ) -> RunnerDaemon:
        """A daemon with its own process store in ``options.data_dir``.

        The folder is made absolute first: a task runs in another folder, and its
        shim must still find the run's files there.
        """
        from watchkeeper.procs.engine import ProcEngine
        from watchkeeper.store.procs import open_store

        options = replace(options, data_dir=options.data_dir.expanduser().resolve())
        options.data_dir.mkdir(parents=True, exist_ok=True)
        store = open_store(f"sqlite:///{options.data_dir / 'runner.db'}")
        engine = ProcEngine(store, options.data_dir, grace_s=options.grace_s)
        return cls(client, options, engine, clock)

    def close(self) -> None:
        """Release the local store."""
        self.engine.store.close()

    # The loop ------------------------------------------------------------------------

    def register(self) -> str:
        """Register with the server; returns the runner's id."""
        found = self.client.runners.register(
            self.options.fleet,
            capacity=self.options.capacity,
            host=identity.host(),
            pid=os.getpid(),
            org=self.options.org,
            name=self.options.name,
        )
        self.runner_id = str(found["id"])
        log.info(
            "Runner %s serves fleet %s with capacity %d",
            self.runner_id,
            self.options.fleet,
            self.options.capacity,
            extra={"action": "runner_register"},
        )
        return self.runner_id

    def run(self, stop: threading.Event) -> None:
        """Register, then serve until ``stop`` is set; leaves cleanly."""
        if self.runner_id is None:
            self.register()
        beats = threading.Thread(target=self._heartbeats, args=(stop,), name="heartbeat")
        guard = threading.Thread(target=self._guard, args=(stop,), name="lease-guard")
        beats.start()
        guard.start()
        try:
            while not stop.is_set():
                self.step()
                stop.wait(TICK_S)
        finally:
            stop.set()
            beats.join()
            guard.join()
            self._leave()

    def step(self) -> None:
        """One pass: find ended runs, renew due leases, ship output, then report the
        ended runs and lease into the free slots (one request when both)."""
        ended = self._collect()
        self._renew_due()
        shipping = [h for h in self.held.values() if h.outcome is None and not h.expiring]
        self._shipper.due([h.shipment for h in shipping if h.shipment], self.clock.now())
        if ended and self._combine:
            self._report_and_lease(ended)
            return
        report_batch.report_apart(self.client, ended, self._tell, self._forget)
        self._lease_if_free()

    # Heartbeats ----------------------------------------------------------------------

    def _heartbeats(self, stop: threading.Event) -> None:
        assert self.runner_id is not None
        while not stop.wait(self.options.heartbeat_s):
            try:
                self.client.runners.heartbeat(self.runner_id)
                self._works("Heartbeat")
            except ClientError as exc:
                if exc.status in (404, 409):
                    log.error(
                        "The server no longer knows runner %s (%s): stopping",
                        self.runner_id,
                        exc.message,
                        extra={"action": "runner_heartbeat"},
                    )
                    stop.set()
                    return
                self._fails("Heartbeat", exc, "runner_heartbeat")

    def _fails(self, what: str, exc: ClientError, action: str) -> None:
        """A warning when ``what`` starts failing; while it goes on failing, debug lines only."""
        level = logging.DEBUG if what in self._failing else logging.WARNING
        self._failing.add(what)
        log.log(level, "%s failed: %s", what, exc, extra={"action": action})

    def _works(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            log.info("%s works again", what, extra={"action": "runner_recovered"})

    # Leasing and starting ------------------------------------------------------------

    def _lease_if_free(self) -> None:
        free = self.options.capacity - len(self.held)
        if free <= 0 or self.clock.now() < self._next_poll:
            return
        assert self.runner_id is not None
        asked = self.clock.now()
        try:
            tasks = self._notes.tasks_of(self.client.runners.lease_answer(self.runner_id, free))
            self._works("Leasing")
        except ClientError as exc:
            self._fails("Leasing", exc, "runner_lease")
            tasks = []
        if len(tasks) < free:
            self._next_poll = self.clock.now() + self.options.poll_s
        for task in tasks:
            self._start(task, asked)

    def _report_and_lease(self, ended: list[HeldTask]) -> None:
        """The outcomes and the lease into the slots they free: one request, one commit."""
        assert self.runner_id is not None
        free = min(self.options.capacity - len(self.held) + len(ended), LEASE_MAX)
        asked = self.clock.now()
        try:
            answer = report_batch.report_and_lease(
                self.client, self.runner_id, ended, free, self._tell, self._forget
            )
        except ClientError as exc:
            log.warning(
                "Reporting %d task(s) failed, will try again: %s",
                len(ended),
                exc,
                extra={"action": "runner_report"},
            )
            return
        if answer is None:  # a server from before: report and lease apart from now on
            self._combine = False
            return
        tasks = self._notes.tasks_of(answer)
        self._works("Leasing")
        if len(tasks) < free:
            self._next_poll = self.clock.now() + self.options.poll_s
        for task in tasks:
            self._start(task, asked)

    def _start(self, task: dict[str, Any], asked: float) -> None:
        lease_s = float(task["lease_s"])
        # Never later than a third of the lease: two renewals may fail before the margin.
        every = min(self.options.renew_s or lease_s / 3, lease_s / 3)
        held = HeldTask(
            str(task["id"]),
            str(task["lease_token"]),
            every,
            self.clock.now() + every,
            lease_s=lease_s,
            stop_by=asked + lease_s * (1 - EXPIRY_MARGIN),
            job_id=task.get("job_id"),
            org=task.get("org"),
        )
        self.held[held.task_id] = held
        payload = task["payload"]
        request = LaunchRequest(
            argv=tuple(payload["argv"]),
            cwd=str(payload.get("cwd") or self.options.data_dir),
            name=f"task {held.task_id}",
            env=task_env(os.environ, self.options.pass_env, url=self.client.url, task=task),
            die_with_parent=True,
            # The shim stops the command by itself if this runner freezes and cannot.
            lease=(self._shim_stop_in(held), self._stop_grace(held)),
        )
        try:
            launched = self.engine.start(request)
        except WatchkeeperError as exc:
            why = self._start_failure(exc)
            log.warning(
                "Task %s could not start: %s", held.task_id, why, extra={"action": "runner_start"}
            )
            held.outcome = {"failed": f"could not start: {why}", "exit_code": None}
            return
        held.run_id, held.shim, held.lease = launched.run.run_id, launched.shim, launched.lease
        held.shipment = Shipment(held.task_id, held.token, held.run_id, self.engine.data_dir)
        self._phase(held, "task_start", None, f"process run {held.run_id} on {identity.host()}")
        log.info(
            "Task %s runs as process run %s",
            held.task_id,
            held.run_id,
            extra={"action": "runner_start"},
        )

    def _start_failure(self, exc: WatchkeeperError) -> str:
        # The shim writes why it stopped into the run's log, which no one else reads.
        run_id = getattr(exc, "run_id", None)
        if not isinstance(run_id, str):
            return str(exc)
        tail = layout.read_tail(layout.log_path(self.engine.data_dir, run_id), START_LOG_TAIL)
        tail = " ".join(tail.split())
        return f"{exc}: {tail}" if tail else str(exc)

    # Renewing ------------------------------------------------------------------------

    def _renew_due(self) -> None:
        for held in list(self.held.values()):
            if held.outcome is not None:
                continue
            now = self.clock.now()
            if now >= held.stop_by:
                self._expire(held)
            elif now >= held.next_renew:
                self._renew(held, now)

    def _renew(self, held: HeldTask, now: float) -> None:
        size = self._log_size(held)
        sent = self.clock.now()
        try:
            self.client.runners.renew(held.task_id, held.token, progressed=size > held.log_size)
        except ClientError as exc:
            if report_batch.lease_gone(exc):
                self._abort(held, exc.message)
                return
            log.warning(
                "Renewing the lease on task %s failed: %s",
                held.task_id,
                exc,
                extra={"action": "runner_renew"},
            )
            held.next_renew = now + min(1.0, held.renew_every)
            return
        held.log_size = size
        held.next_renew = now + held.renew_every
        held.stop_by = sent + held.lease_s - held.margin
        if held.lease is not None:
            held.lease.renew(self._shim_stop_in(held), self._stop_grace(held))

    # Lapsing leases ------------------------------------------------------------------

    def _guard(self, stop: threading.Event) -> None:
        # The main loop may sit in a request to a server that does not answer.
        while not stop.wait(TICK_S):
            now = self.clock.now()
            for held in list(self.held.values()):
                if held.outcome is None and now >= held.stop_by and self._claim_expiry(held):
                    self._stop_command(held)

    def _claim_expiry(self, held: HeldTask) -> bool:
        with self._expiry:
            if held.expiring:
                return False
            held.expiring = True
            return True

    def _stop_command(self, held: HeldTask) -> None:
        log.warning(
            "Could not renew the lease on task %s: stopping its command before its lease "
            "lapses, so the server may hand the task to another runner",
            held.task_id,
            extra={"action": "runner_expire"},
        )
        if held.run_id is not None and held.shim is not None and held.shim.poll() is None:
            self.engine.abort(held.run_id, grace_s=self._stop_grace(held))

    def _shim_stop_in(self, held: HeldTask) -> float:
        """How long the shim lets the command run unless renewed: a few of this runner's ticks
        past its own stop, so the runner stops it when it can and the shim only when it
        cannot (frozen), still well inside the margin before the lease lapses."""
        return held.stop_by + min(4 * TICK_S, held.margin / 8) - self.clock.now()

    def _stop_grace(self, held: HeldTask) -> float:
        """How long a command stopped for a lapsing lease gets before SIGKILL."""
        return min(self.options.grace_s, held.margin / 2)

    def _expire(self, held: HeldTask) -> None:
        # Whichever thread stopped the command, only the main loop forgets the task.
        if self._claim_expiry(held):
            self._stop_command(held)
        if held.shim is not None:
            held.shim.wait()
        self._forget(held)

    def _forget(self, held: HeldTask) -> None:
        """Drop a task whose command has ended: its shim needs no more renewals."""
        self.held.pop(held.task_id, None)
        if held.lease is not None:
            held.lease.close()

    def _log_size(self, held: HeldTask) -> int:
        if held.run_id is None:
            return 0
        try:
            return layout.log_path(self.engine.data_dir, held.run_id).stat().st_size
        except OSError:
            return held.log_size

    def _abort(self, held: HeldTask, why: str) -> None:
        self._forget(held)
        if held.run_id is not None and held.shim is not None and held.shim.poll() is None:
            self.engine.abort(held.run_id, grace_s=self.options.grace_s)
            held.shim.wait()
        log.info("Stopped task %s: %s", held.task_id, why, extra={"action": "runner_abort"})

    # Reporting -----------------------------------------------------------------------

    def _collect(self) -> list[HeldTask]:
        """The held tasks whose run ended (their outcome found now or in an earlier pass
        whose report failed), not yet reported."""
        for held in list(self.held.values()):
            if held.expiring:
                continue  # its lease is lapsing: nothing can be reported, it is only dropped
            if held.outcome is None and self.clock.now() >= held.stop_by:
                # The same, seen first here: the runner was frozen past its own stop, and the
                # shim stopped the command for it. The next renewal pass drops it.
                continue
            if held.outcome is None and held.shim is not None and held.shim.poll() is not None:
                held.outcome = self._outcome(held)
        return [h for h in self.held.values() if h.outcome is not None and not h.expiring]

    def _outcome(self, held: HeldTask) -> dict[str, Any]:
        assert held.run_id is not None
        run = self.engine.refresh(held.run_id)
        if run.status is ProcStatus.SUCCEEDED:
            return {"succeeded": True, "exit_code": run.exit_code}
        reason = run.reason or f"ended {run.status.value}"
        return {"failed": reason, "exit_code": run.exit_code}

    def _tell(self, held: HeldTask, outcome: dict[str, Any]) -> None:
        """The output tail and the end event, once, before the outcome is reported."""
        held.told = True
        if held.shipment is not None:
            self._shipper.finish(held.shipment)
        code = outcome["exit_code"]
        said = "" if code is None else f"exit code {code}"
        if "succeeded" in outcome:
            self._phase(held, "task_end", "ok", said)
        else:
            self._phase(held, "task_end", "failed", f"{outcome['failed']}; {said}".strip("; "))

    def _phase(self, held: HeldTask, phase: str, outcome: str | None, detail: str) -> None:
        event = {"phase": phase, "task_id": held.task_id, "job_id": held.job_id, "org": held.org}
        event |= {"outcome": outcome, "detail": detail or None}
        try:
            self._timeline.emit(event)
        except ClientError as exc:
            log.warning(
                "The %s event of task %s was not recorded: %s",
                phase,
                held.task_id,
                exc,
                extra={"action": "runner_timeline"},
            )

    def _report(self, held: HeldTask) -> None:
        report_batch.report_one(self.client, held, self._tell, self._forget)

    # Leaving -------------------------------------------------------------------------

    def _leave(self) -> None:
        for held in list(self.held.values()):
            if held.outcome is None:
                self._abort(held, "the runner is stopping")
            else:
                self._report(held)
        if self.runner_id is None:
            return
        try:
            self.client.runners.stop(self.runner_id)
        except ClientError as exc:
            log.warning(
                "Could not say goodbye; the leases will lapse instead: %s",
                exc,
                extra={"action": "runner_stop"},
            )
