"""A job that came from a GitHub pull request or issue says there how it ended, once.

Its origin is ``github:OWNER/REPO#N``. When it is submitted (and when it runs again
after it ended: retried, resumed) the issue is labelled ``watchkeeper:waiting``, best
effort: a failure is logged, the job is queued anyway. When every task has ended, the
server's sweep posts one comment (how the job ended, how long it took, the redacted
tail of its last task's output as its runner shipped it, a link to its record) and one
outcome label in place of the others, read like a process run's
(:func:`watchkeeper.procs.github_results.outcome`): a last line ``PARKED: reason`` or
``BLOCKED: reason`` wins over how the job ended.

Exactly once, across restarts and replicas: each end is claimed in the journal
(``store/queue/results.py``) by one conditional update before anything is posted;
a claim left in flight longer than a post can take is ``maybe_fired`` (maybe posted)
and never posted again. The runner posts nothing: it needs no ``[forge]``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

from watchkeeper import redact
from watchkeeper.clock import Now
from watchkeeper.errors import InvalidInput, NotFound
from watchkeeper.procs import github_results as gh
from watchkeeper.queue import rollup
from watchkeeper.records.queue import Job, JobStatus, Task

if TYPE_CHECKING:
    from watchkeeper.config import ForgeConfig
    from watchkeeper.store.queue import QueueStore

log = logging.getLogger(__name__)
#: Longer than a post can take (a comment, a label and four removals, ``TIMEOUT_S`` each): a
#: claim older than this belongs to a server that stopped while posting. Marking one that is
#: only slow is harmless: ``maybe_fired`` is never posted again, and its late settling is void.
STALE_AFTER_S = 6 * gh.TIMEOUT_S + 15.0
TAIL_LINES = 20
#: Most ends one sweep posts: a backlog drains over the next sweeps, never holding one long.
BATCH = 20
_ENDED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
R = TypeVar("R")


def checked_origin(value: str | None) -> str | None:
    """A submitted origin as kept, or :class:`InvalidInput` saying how to write it."""
    if value is None:
        return None
    try:
        return gh.canonical(value.strip())
    except ValueError as exc:
        raise InvalidInput(f"origin {exc}", "origin") from None


@dataclass(frozen=True, slots=True)
class Posted:
    """What posting one job's end came to."""

    job_id: str
    fired: bool
    error: str | None = None


class JobResults:
    """Labels and comments on the issues jobs came from, through the result journal."""

    def __init__(self, store: QueueStore, forge: ForgeConfig | None, clock: Now) -> None:
        self.store = store
        self.github = gh.GitHubResults(forge)
        self.clock = clock
        self.stale_after_s = STALE_AFTER_S
        self.batch = BATCH

    def announce(self, job: Job) -> None:
        """Label the job's issue ``watchkeeper:waiting`` (if it came from one); a failure is
        logged, never raised."""
        if job.origin is None:
            return
        unlabelled = self.github.announce(gh.origin_of(job.origin))
        if unlabelled:
            log.warning("Job %s: %s", job.id, unlabelled, extra={"action": "queue_github"})

    def rearmed(self, job_id: str, result: R, *, again: bool = True) -> R:
        """``result``, once a job that runs ``again`` (retried, resumed) is labelled waiting
        and its next end is to be posted too."""
        if again and self.store.rearm_result(job_id):
            self.announce(self.store.job(job_id))
        return result

    def claim(self, job_id: str, now: datetime) -> Job | None:
        """Claim the post of the job's end if it has ended; the job when this call won."""
        try:
            job = self.store.job(job_id)
        except NotFound:  # deleted since it was found due
            return None
        if rollup.of_tasks(job.tasks) not in _ENDED:
            return None
        last = _last(job)
        return job if self.store.claim_result(job.id, f"{last.id}:{last.version}", now) else None

    def post_due(self, now: datetime) -> list[Posted]:
        """Post the end of every job that ended and whose end nobody claimed; what was done.

        Claims older than :data:`STALE_AFTER_S` become ``maybe_fired`` first.
        """
        self.store.reconcile_results(now - timedelta(seconds=self.stale_after_s))
        done = []
        for job_id in self.store.due_results(self.batch):
            job = self.claim(job_id, now)
            if job is not None:
                done.append(self._post(job))
        return done

    def _post(self, job: Job) -> Posted:
        last = _last(job)
        status = rollup.of_tasks(job.tasks)
        try:
            kept = self.store.output(last.id)
        except NotFound:  # deleted since the claim: its journal row went with it
            return Posted(job.id, False, "the job was deleted")
        tail = redact.tail(kept.tail if kept else "", TAIL_LINES)
        word, reason = gh.outcome(status.value, tail)
        body = comment(job, status, last, tail, word, reason, self.github.public_url)
        errors = self.github.post_end(gh.origin_of(job.origin), word, body)
        error = "; ".join(errors) or None
        self.store.settle_result(job.id, error is None, error, self.clock())
        log.info(
            "Result of job %s on %s: %s",
            job.id,
            job.origin,
            "posted" if error is None else error,
            extra={"action": "queue_github"},
        )
        return Posted(job.id, error is None, error)

    def state(self, job_id: str) -> str | None:
        """Where the post of the job's end is: ``waiting``, ``firing``, ``fired``, ..."""
        found = self.store.result_of(job_id)
        return None if found is None else found[0]

    def error(self, job_id: str) -> str | None:
        """Why the post of the job's end failed, if it did."""
        found = self.store.result_of(job_id)
        return None if found is None else found[1]


def _last(job: Job) -> Task:
    return max(job.tasks, key=lambda task: task.seq)


def comment(
    job: Job,
    status: JobStatus,
    last: Task,
    tail: str,
    word: str,
    reason: str | None,
    public_url: str | None,
) -> str:
    """The comment's Markdown: how the job ended, its last task's output, a link to its record."""
    finished = max((t.finished_at for t in job.tasks if t.finished_at), default=None)
    duration = None if finished is None else (finished - job.created_at).total_seconds()
    took = "before it ran" if last.leased_at is None else gh.duration_words(duration)
    tasks = f"{len(job.tasks)} tasks" if len(job.tasks) > 1 else "1 task"
    lines = [
        f"**watchkeeper** · job `{job.title}` ({job.id}) **{status.value}**, {took} ({tasks}).",
        f"Label: `{gh.PREFIX}{word}`" + (f": {reason}" if reason else ""),
    ]
    if word == "ready" and gh.declared_done(tail):
        lines.append("Done, as the job declared.")
    ended = "no exit code" if last.exit_code is None else f"exit code {last.exit_code}"
    lines.append(f"Last task: {last.id}, {last.status.value}, {ended}.")
    if last.failure_reason:
        lines.append(f"Reason: {redact.redact(last.failure_reason)}")
    lines += gh.output_block(tail)
    if public_url:
        lines += ["", f"Record: {public_url.rstrip('/')}/web/jobs/{job.id}"]
    return "\n".join(lines)
