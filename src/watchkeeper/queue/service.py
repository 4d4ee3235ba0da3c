"""The queue in one object: what the API, the CLI, the kind and the sweeper call.

``QueueService`` holds the queue store, the policy from the configuration and
the clock, and wires the small modules together: the lease rule of
:mod:`rules` is what the store admits tasks with, and the same rule explains
why queued tasks wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from watchkeeper.clock import Now, utcnow
from watchkeeper.contract import fingerprint as failure_fingerprint
from watchkeeper.errors import NotFound
from watchkeeper.queue import control, launcher, rollup, rules
from watchkeeper.queue.configured import configured_launchers, policy_of
from watchkeeper.queue.errors import LeaseLost
from watchkeeper.queue.idle import idle_reason
from watchkeeper.queue.leasing import LeasePass, fingerprinted, lease_terms
from watchkeeper.queue.outputs import TaskOutputs
from watchkeeper.queue.payload import check_payload
from watchkeeper.queue.results import JobResults, checked_origin
from watchkeeper.queue.topology import topology
from watchkeeper.queue.views import TaskUpdated, task_json
from watchkeeper.records.queue import (
    Event,
    Job,
    JobStatus,
    Lease,
    NewJob,
    NewRunner,
    QueuedTask,
    Recovery,
    Runner,
    Task,
)
from watchkeeper.redact import redact
from watchkeeper.store.group_commit import GroupCommit
from watchkeeper.store.queue import End as End  # the outcome a route records
from watchkeeper.store.queue import QueueStore

if TYPE_CHECKING:
    from watchkeeper.config import Settings
    from watchkeeper.store import Store

log = logging.getLogger(__name__)
#: Lapsed leases are taken back at most this often from the lease path.
RECOVERY_GAP = timedelta(seconds=1)
MAX_LEASE_BATCH = 100


@dataclass(frozen=True, slots=True)
class JobScan:
    """Jobs a scan kept, how many it read, and whether it stopped at its limit."""

    jobs: list[Job]
    scanned: int
    cut: bool


@dataclass(frozen=True, slots=True)
class QueueSweep:
    """What one sweep did to the queue."""

    recovered: Recovery
    provisioned: tuple[tuple[str, str, str | None], ...] = ()


class QueueService:
    """Submits, leases, explains and controls the queue's work."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        clock: Now = utcnow,
        launchers: Mapping[str, launcher.Launcher] | None = None,
    ) -> None:
        self.store = QueueStore(store.engine)
        self.settings = settings
        self.config = settings.queue
        self.policy = policy_of(settings)
        self.clock = clock
        self.launchers: Mapping[str, launcher.Launcher] = (
            launchers if launchers is not None else configured_launchers(settings)
        )
        self._recovered_at: datetime | None = None
        #: Posts the end of a job that came from GitHub where it came from.
        self.results = JobResults(self.store, settings.forge, clock)
        self.outputs = TaskOutputs(self.store, clock)
        self.group: GroupCommit[End, Task | LeaseLost] = GroupCommit(self._end_together)

    # Jobs ----------------------------------------------------------------------------

    def submit(
        self,
        title: str,
        *,
        org: str,
        fleet: str,
        payload: dict[str, Any],
        submitted_by: str,
        rerunnable: bool = True,
        max_attempts: int | None = None,
        lease_s: float | None = None,
        origin: str | None = None,
    ) -> Job:
        """Queue a job; its first task waits for a runner of ``fleet``. ``origin``
        (``github:OWNER/REPO#N``) is told how it ended when it ends (:mod:`results`)."""
        check_payload(payload)
        new = NewJob(
            title=redact(title),  # descriptive (often the command): kept redacted
            org=org,
            fleet=fleet,
            payload=payload,
            submitted_by=submitted_by,
            rerunnable=rerunnable,
            max_attempts=max_attempts or self.config.max_attempts,
            lease_s=lease_s or self.config.lease_s,
            origin=checked_origin(origin),
        )
        job = self.store.submit(new, self.clock())
        log.info("Submitted job %s to fleet %s", job.id, fleet, extra={"action": "queue_submit"})
        self.results.announce(job)
        return job

    def resume(self, job_id: str, payload: dict[str, Any] | None = None) -> Task:
        """Add a continuation task to a job whose tasks have all ended."""
        if payload is not None:
            check_payload(payload)
        return self.results.rearmed(job_id, self.store.resume(job_id, payload, self.clock()))

    def job(self, job_id: str) -> Job:
        """One job with its tasks."""
        return self.store.job(job_id)

    def find_job(self, job_id: str) -> Job | None:
        """One job with its tasks; ``None`` when there is none (a record outlives its job)."""
        try:
            return self.store.job(job_id)
        except NotFound:
            return None

    def task(self, task_id: str) -> Task:
        """One task."""
        return self.store.task(task_id)

    def job_events(self, job_id: str) -> list[Event]:
        """The moves of a job's tasks (leased, failed, queued again, ...), oldest first."""
        return self.store.events(job_id)

    def jobs(
        self,
        *,
        status: JobStatus | None = None,
        fleet: str | None = None,
        org: str | None = None,
        limit: int = 200,
    ) -> list[Job]:
        """Jobs newest first, filtered by their rolled-up status."""
        found = self.scan_jobs(
            fleet=fleet,
            org=org,
            active=unfinished(status),
            keep=None if status is None else (lambda job: rollup.of_job(job) is status),
            need=limit,
            batch=max(limit, 100),
        )
        return found.jobs[:limit]

    def scan_jobs(
        self,
        *,
        fleet: str | None = None,
        org: str | None = None,
        active: bool | None = None,
        keep: Callable[[Job], bool] | None = None,
        need: int | None = None,
        batch: int = 500,
        most: int | None = None,
        text: str | None = None,
    ) -> JobScan:
        """Jobs newest first that ``keep`` accepts, read a batch at a time.

        Reading stops once ``need`` jobs are kept (never, without it), or before
        the batch that would start past ``most`` jobs read (then ``cut``). An
        ASCII ``text`` spares reading jobs that cannot contain it (see
        ``QueueStore.jobs``); ``keep`` still decides.
        """
        text = text if text and text.isascii() else None
        found: list[Job] = []
        offset = 0
        while need is None or len(found) < need:
            if most is not None and offset >= most:
                return JobScan(found, offset, True)
            page, read = self.store.jobs_page(
                fleet=fleet, org=org, active=active, limit=batch, offset=offset, text=text
            )
            found += [job for job in page if keep is None or keep(job)]
            offset += read
            if read < batch:
                break
        return JobScan(found, offset, False)

    # Blocked reasons -----------------------------------------------------------------

    def explain(self, tasks: Sequence[QueuedTask]) -> dict[str, rules.Blocked]:
        """Why each queued task waits; best-effort: a failure here says ``unknown``, logged."""
        if not tasks:
            return {}
        try:
            capped = {task.org for task in tasks if self.policy.org(task.org).capped}
            snapshot = self.store.snapshot(self.clock(), capped)
            return rules.explain_all(tasks, snapshot, self.policy)
        except Exception as exc:  # the explanation must never fail the status request
            log.exception("Could not explain why tasks wait", extra={"action": "queue_explain"})
            return {task.id: rules.unknown(exc) for task in tasks}

    def waiting(self, task_ids: Sequence[str]) -> dict[str, rules.Blocked]:
        """Why each of ``task_ids`` that is queued waits."""
        return self.explain(self.store.queued(task_ids=list(task_ids)))

    def blocked(self, jobs: Sequence[Job] = ()) -> dict[str, rules.Blocked]:
        """Reasons for the queued tasks of ``jobs`` (every queued task when none are given)."""
        try:
            queued = self.store.queued(job_ids=[job.id for job in jobs] if jobs else None)
        except Exception as exc:  # best-effort, as above
            log.exception("Could not read queued tasks", extra={"action": "queue_explain"})
            ids = [t.id for job in jobs for t in job.tasks if t.status.value == "queued"]
            return {task_id: rules.unknown(exc) for task_id in ids}
        return self.explain(queued)

    # Runners -------------------------------------------------------------------------

    def register(self, new: NewRunner) -> Runner:
        """Record a runner; cold starts it answers are forgotten."""
        runner = self.store.register(new, self.clock())
        self.store.clear_provisions(new.fleet, new.org)
        log.info(
            "Runner %s registered for fleet %s on %s (capacity %d)",
            runner.id,
            runner.fleet,
            runner.host,
            runner.capacity,
            extra={"action": "queue_register"},
        )
        return runner

    def heartbeat(self, runner_id: str) -> Runner:
        """The runner is alive."""
        return self.store.heartbeat(runner_id, self.clock())

    def stop_runner(self, runner_id: str) -> Recovery:
        """The runner leaves: its leases are taken back at once."""
        now = self.clock()
        self.store.stop_runner(runner_id, now)
        return self.store.recover(now, runner_id=runner_id)

    def runners(self) -> list[Runner]:
        """Registered runners."""
        return self.store.runners()

    def alive(self, runner: Runner) -> bool:
        """Alive by its own heartbeat."""
        return rules.runner_alive(runner, self.clock(), self.policy)

    def running_tasks(self) -> list[Task]:
        """Every task a runner holds now."""
        return self.store.running_tasks()

    def topology(self) -> dict[str, Any]:
        """Fleets, runners (alive or not) and the tasks each runs now."""
        return topology(
            self.runners(), self.running_tasks(), self.store.queued(), self.policy, self.clock()
        )

    # Interrupted markers -------------------------------------------------------------

    def marks(self, tasks: Sequence[Task]) -> dict[str, str]:
        """``interrupted_at`` of each of ``tasks`` a restart interrupted."""
        return self.store.interrupted([task.id for task in tasks])

    def _running_again(self, tasks: Sequence[Task], on_update: TaskUpdated | None) -> None:
        """The tasks run again: their interrupted markers go, and each removal is told."""
        if not tasks:
            return
        removed = set(self.store.clear_interrupted([task.id for task in tasks], self.clock()))
        if on_update is None:
            return
        for task in tasks:
            if task.id in removed:
                on_update(task_json(task, {}, {}))

    # Leases --------------------------------------------------------------------------

    def lease(
        self, runner_id: str, limit: int = 1, *, on_update: TaskUpdated | None = None
    ) -> list[Lease]:
        """Lease up to ``limit`` tasks the lease rules allow this runner.

        A leased task a restart had interrupted loses its marker; ``on_update``
        gets its new form.
        """
        return self.report_and_lease(runner_id, [], max(1, limit), on_update=on_update)[1]

    def report_and_lease(
        self,
        runner_id: str,
        ends: Sequence[End],
        limit: int,
        *,
        on_update: TaskUpdated | None = None,
    ) -> tuple[list[Task | LeaseLost], list[Lease]]:
        """Record a runner's outcomes as :meth:`end_many` does (a lost lease is refused
        alone), then lease as :meth:`lease` up to ``limit`` tasks (none for 0) into the
        slots they freed: one transaction for a runner's pass. When the lease is refused
        (unknown or stopped runner) nothing is recorded: the runner may send them again.
        """
        done = self.lease_pass(runner_id, ends, limit, on_update=on_update)
        return done.outcomes, done.leases

    def lease_pass(
        self,
        runner_id: str,
        ends: Sequence[End],
        limit: int,
        *,
        on_update: TaskUpdated | None = None,
    ) -> LeasePass:
        """:meth:`report_and_lease`, with why no task was leased (:mod:`idle`). The lease
        is the runner's proof of life: it counts as a heartbeat."""
        limit = max(0, min(limit, MAX_LEASE_BATCH))
        now = self.clock()
        if limit:
            self.recover_due(now)
        done = self.store.end_and_lease(
            fingerprinted(ends), runner_id, now, **lease_terms(self.policy, now, limit)
        )
        leases = done.leases
        self._running_again([x.task for x in leases if x.task.id in done.marked], on_update)
        reason = None
        if done.runner is not None:
            reason = idle_reason(self.store, self.policy, done.runner, len(leases), now)
        return LeasePass(_lost_or_ended(ends, done.ended), leases, reason)

    def renew(
        self,
        task_id: str,
        token: str,
        *,
        progressed: bool = False,
        step: str | None = None,
        on_update: TaskUpdated | None = None,
    ) -> Task:
        """Renew a lease; :class:`LeaseLost` tells the runner to stop.

        A task a restart had interrupted loses its marker; ``on_update`` gets its
        new form.
        """
        task = self.store.renew(task_id, token, self.clock(), progressed=progressed, step=step)
        if task is None:
            raise LeaseLost(task_id)
        self._running_again([task], on_update)
        return task

    def complete(self, task_id: str, token: str, exit_code: int | None = 0) -> Task:
        """Record success; :class:`LeaseLost` when the lease is gone (nothing recorded)."""
        task = self.store.complete(task_id, token, self.clock(), exit_code=exit_code)
        if task is None:
            raise LeaseLost(task_id)
        return task

    def end_many(self, ends: Sequence[End]) -> list[Task | LeaseLost]:
        """Record several outcomes, each under its own lease, in one transaction with
        those other threads send at the same moment (:mod:`group`); returns after
        that commit.

        In the place of each: the ended task, or :class:`LeaseLost` when its
        lease is gone (that outcome alone is not recorded). A failure without a
        fingerprint gets one from its reason.
        """
        return self.group.run(fingerprinted(ends))

    def _end_together(self, ends: list[End]) -> list[Task | LeaseLost]:
        return _lost_or_ended(ends, self.store.end_many(ends, self.clock()))

    def fail(
        self,
        task_id: str,
        token: str,
        reason: str,
        *,
        fingerprint: str | None = None,
        exit_code: int | None = None,
    ) -> Task:
        """Record failure; :class:`LeaseLost` when the lease is gone."""
        task = self.store.fail(
            task_id,
            token,
            self.clock(),
            reason=reason,
            fingerprint=fingerprint or failure_fingerprint(reason),
            exit_code=exit_code,
        )
        if task is None:
            raise LeaseLost(task_id)
        return task

    def recover_due(self, now: datetime) -> Recovery | None:
        """Take back lapsed leases unless that was done within the last second."""
        if self._recovered_at is not None and now - self._recovered_at < RECOVERY_GAP:
            return None
        self._recovered_at = now
        return self.recover(now)

    def recover(self, now: datetime | None = None) -> Recovery:
        """Take back every lapsed lease now."""
        found = self.store.recover(now or self.clock())
        if found.total:
            log.info(
                "Took back %d lapsed lease(s): %d queued again, %d stuck, %d out of attempts",
                found.total,
                len(found.requeued),
                len(found.stuck),
                len(found.failed),
                extra={"action": "queue_recover"},
            )
        return found

    # Control -------------------------------------------------------------------------

    def cancel(self, job_id: str) -> control.Controlled:
        """Cancel the job's unfinished tasks (revoking running leases)."""
        return control.cancel(self.store, job_id, self.clock())

    def retry(self, job_id: str) -> control.Controlled:
        """Queue the job's failed, cancelled and stuck tasks again."""
        done = control.retry(self.store, job_id, self.clock())
        return self.results.rearmed(job_id, done, again=bool(done.affected))

    def delete(self, job_id: str) -> control.Controlled:
        """Delete the job (refused while a task runs)."""
        return control.delete(self.store, job_id)

    # The sweep ----------------------------------------------------------

    def sweep(self, now: datetime) -> QueueSweep:
        """The sweep hook: take back lapsed leases, post the ends of jobs that came from
        GitHub, then cold-start missing runners."""
        recovered = self.recover(now)
        self.results.post_due(now)
        if not self.launchers:
            return QueueSweep(recovered)
        queued = [t for t in self.store.queued() if t.org in self.launchers]
        if not queued:
            return QueueSweep(recovered)
        capped = {t.org for t in queued if self.policy.org(t.org).capped}
        snapshot = self.store.snapshot(now, capped)
        pairs = launcher.wanted(
            queued, snapshot, self.policy, self.launchers, self.config.provision_retry_s
        )
        # Each cold start is claimed on the row this sweep read; a pair another
        # replica claimed since is left out, so each fleet is launched once.
        done = []
        for org, fleet in pairs:
            seen = snapshot.provisions.get((org, fleet))
            began = launcher.provision(self.store, self.launchers[org], org, fleet, now, seen)
            if began is not None:
                done.append(began)
        return QueueSweep(recovered, tuple(done))


def _lost_or_ended(ends: Sequence[End], found: Sequence[Task | None]) -> list[Task | LeaseLost]:
    return [LeaseLost(e.task_id) if t is None else t for e, t in zip(ends, found, strict=True)]


def unfinished(status: JobStatus | None) -> bool | None:
    """Whether jobs of ``status`` have an unfinished task (``None``: either way)."""
    if status is None:
        return None
    return status in (JobStatus.QUEUED, JobStatus.RUNNING)
