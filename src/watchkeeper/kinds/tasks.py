"""The ``task`` kind: tasks of watchkeeper's own job queue, leased by runners.

The owner is the runner holding the lease, alive while the lease is live
(counted from its last renewal). A task whose lease lapsed is stuck until the
queue takes it back (re-runnable tasks go back to the queue; the others stay
stuck for a person); a task whose runner renews but whose timeline has not
moved within the budget is stalled, and one whose timeline keeps sending rounds
with the same fingerprint (:func:`~watchkeeper.kinds.repeats.repeated_rounds`) is
looping; a failed task is failed. Queued tasks are not judged: their blocked
reason says why they wait.

The kind's own actions are ``cancel`` and ``retry``; a task's effects come
from its re-runnable flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from watchkeeper.contract import (
    NO_OWNER,
    Action,
    Effects,
    Failure,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
)
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import Adapter
from watchkeeper.kinds.repeats import Repetition, last_event_at, repeated_rounds
from watchkeeper.queue import control
from watchkeeper.queue.results import JobResults
from watchkeeper.records.queue import Task, TaskStatus
from watchkeeper.store.queue import QueueStore
from watchkeeper.store.queue.judging import FailedLine, JudgingReads, QueuedLine

FINISHED_WINDOW = timedelta(days=1)
_STATUS = {
    TaskStatus.QUEUED: RunStatus.QUEUED,
    TaskStatus.RUNNING: RunStatus.RUNNING,
    TaskStatus.STUCK: RunStatus.RUNNING,
    TaskStatus.SUCCEEDED: RunStatus.SUCCEEDED,
    TaskStatus.FAILED: RunStatus.FAILED,
    TaskStatus.CANCELLED: RunStatus.CANCELLED,
}
_OWN_ACTIONS = frozenset({Action.CANCEL, Action.RETRY})


class TasksAdapter(Adapter):
    """Reads queue tasks from watchkeeper's own store; acts through the queue's control."""

    adapter_name = "tasks"

    def _queue(self) -> QueueStore:
        store = self.context.store
        if store is None:
            raise RuntimeError("the tasks adapter needs watchkeeper's store")
        return QueueStore(store.engine)

    def read(self, now: datetime) -> Sequence[RunView]:
        """Unfinished tasks and those that ended within the last day."""
        store = self.context.store
        if store is None:
            raise RuntimeError("the tasks adapter needs watchkeeper's store")
        found, queued, unreadable = JudgingReads(store.engine).for_judging_split(
            now - FINISHED_WINDOW
        )
        moved = self._timeline_progress([task for task, _ in found])
        views = [_seen(self.name, task, title, now, moved.get(task.id)) for task, title in found]
        views.extend(queued_view(self.name, task) for task in queued)
        views.extend(failed_view(self.name, task) for task in unreadable)
        return views

    def read_one(self, run_id: str, now: datetime) -> RunView | None:
        """One task by id."""
        found = self._queue().for_judging(now - FINISHED_WINDOW, task_id=run_id)
        if not found:
            return None
        task, title = found[0]
        return _seen(self.name, task, title, now, self._timeline_progress([task]).get(task.id))

    def _timeline_progress(self, tasks: Sequence[Task]) -> dict[str, Timeline]:
        # A running task's timeline decides whether it moves: a round that repeats the
        # previous round's fingerprint is not progress, however many events it sends; the
        # rounds that repeat it, still coming, are the task looping.
        running = [t.id for t in tasks if t.status is TaskStatus.RUNNING]
        store = self.context.store
        if not running or store is None:
            return {}
        from watchkeeper.store.timeline import TimelineStore
        from watchkeeper.timeline.service import progress_time

        found: dict[str, Timeline] = {}
        for task_id, facts in TimelineStore(store.engine).progress_facts(running).items():
            found[task_id] = Timeline(
                _moment(progress_time(facts)), _moment(last_event_at(facts)), repeated_rounds(facts)
            )
        return found

    def capabilities(self) -> frozenset[Action]:
        """Cancel and retry are the queue's own; configured actions are kept too."""
        return super().capabilities() | _OWN_ACTIONS

    def perform(self, request: ActionRequest) -> str:
        """Cancel or retry the task through the queue's control."""
        queue = self._queue()
        now = self.context.clock()  # the decider's request carries no time: actions happen now
        if request.action is Action.CANCEL:
            done = control.cancel_task(queue, request.run_id, now)
            return f"cancelled {done.affected} task(s)"
        if request.action in (Action.RETRY, Action.RETRY_CHECKED):
            done = control.retry_task(queue, request.run_id, now)
            if not done.affected:
                raise ActionFailed(f"task {request.run_id} cannot be retried now")
            # Its job runs again: where it came from hears so, and of its next end.
            results = JobResults(queue, self.context.settings.forge, self.context.clock)
            results.rearmed(queue.task(request.run_id).job_id, done)
            return f"queued {done.affected} task(s) again"
        return super().perform(request)

    def evidence(self, run_id: str) -> dict[str, str]:
        """The attempt, the runner and how the last attempt ended."""
        task = self._queue().task(run_id)
        facts = {
            "attempt": f"{task.attempt} of {task.max_attempts}",
            "rerunnable": str(task.rerunnable).lower(),
            "fleet": task.fleet,
            "org": task.org,
        }
        if task.runner_id:
            facts["runner"] = task.runner_id
        if task.exit_code is not None:
            facts["exit_code"] = str(task.exit_code)
        return facts


@dataclass(frozen=True, slots=True)
class Timeline:
    """What a running task's timeline says: when it last moved, when its latest event came,
    and the rounds repeating the same fingerprint at its end, if they do."""

    progress_at: datetime | None
    reported_at: datetime | None
    repetition: Repetition | None


def _moment(at: float | None) -> datetime | None:
    return None if at is None else datetime.fromtimestamp(at, UTC)


def _seen(kind: str, task: Task, title: str, now: datetime, timeline: Timeline | None) -> RunView:
    """A task in the read model as its timeline (if it has one) shows it."""
    if timeline is None:
        return view(kind, task, title, now)
    seen = view(kind, task, title, now, timeline.progress_at)
    if timeline.repetition is None:
        return replace(seen, reported_at=timeline.reported_at)
    return replace(
        seen,
        reported_at=timeline.reported_at,
        repeats=timeline.repetition.count,
        repeating=timeline.repetition.what,
    )


def queued_view(kind: str, task: QueuedLine) -> RunView:
    """A queued task in the read model: what :func:`view` makes of it, from fewer columns."""
    return RunView(
        kind=kind,
        run_id=task.id,
        title=task.title if task.seq == 0 else f"{task.title} (continuation {task.seq})",
        status=RunStatus.QUEUED,
        state_token=task.state_token,
        owner=NO_OWNER,
        progress_at=task.progress_at,
        effects=Effects.NONE if task.rerunnable else Effects.UNKNOWN,
        step=task.step,
    )


def failed_view(kind: str, task: FailedLine) -> RunView:
    """A failed task whose row cannot be read whole (a lease set it aside): failed, with
    its reason, so people are told as of any failed task."""
    return RunView(
        kind=kind,
        run_id=task.id,
        title=task.title if not task.seq else f"{task.title} (continuation {task.seq})",
        status=RunStatus.FAILED,
        state_token=task.state_token,
        finished_at=task.finished_at,
        failure=Failure(task.failure_reason, task.failure_fingerprint),
    )


def view(
    kind: str, task: Task, title: str, now: datetime, timeline_progress: datetime | None = None
) -> RunView:
    """One task in the read model; a task with a timeline moves only when its timeline does."""
    status = _STATUS[task.status]
    owner = Owner()
    if task.status in (TaskStatus.RUNNING, TaskStatus.STUCK):
        expires = task.lease_expires_at
        alive = task.status is TaskStatus.RUNNING and expires is not None and expires > now
        owner = Owner(OwnerKind.RUNNER, task.runner_id, alive, expires)
    failure = None
    if task.status is TaskStatus.FAILED:
        failure = Failure(task.failure_reason or "failed", task.failure_fingerprint or "")
    return RunView(
        kind=kind,
        run_id=task.id,
        title=title if task.seq == 0 else f"{title} (continuation {task.seq})",
        status=status,
        state_token=task.state_token,
        owner=owner,
        progress_at=timeline_progress or task.progress_at,
        started_at=task.leased_at,
        finished_at=task.finished_at,
        effects=Effects.NONE if task.rerunnable else Effects.UNKNOWN,
        failure=failure,
        step=task.step,
    )
