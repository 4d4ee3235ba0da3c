"""A job that came from a GitHub pull request or issue says how it ended there, once.

GitHub is a local fake (tests/support/fake_github.py) that checks the token. The queue
service is the server's: it labels the issue when the job is submitted, and its sweep
posts the end: one comment and one outcome label, claimed first, never posted twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_github import TOKEN, FakeGitHub, fake_github
from watchkeeper.clock import ManualClock
from watchkeeper.errors import InvalidInput
from watchkeeper.queue.service import QueueService
from watchkeeper.records.queue import Job
from watchkeeper.store import Store

from .conftest import make_service, runner

ISSUE = "acme/app#42"
ORIGIN = "github:acme/app#42"
PUBLIC = "https://wk.example.test"
SECRET = "sk-abcdefghijklmnopqrstuv"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with fake_github() as fake:
        yield fake


def forge_of(github: FakeGitHub, token: str = TOKEN) -> dict[str, Any]:
    """The ``[forge]`` table of a server that posts to ``github``."""
    return {"github_token": token, "github_api_url": github.url, "public_url": PUBLIC}


@pytest.fixture
def queue(tmp_path: Path, store: Store, clock: ManualClock, github: FakeGitHub) -> QueueService:
    return make_service(tmp_path, store, clock, forge=forge_of(github))


def _submit(queue: QueueService, origin: str | None = ORIGIN, title: str = "fix it") -> Job:
    return queue.submit(
        title,
        org="free",
        fleet="cpu",
        payload={"argv": ["make"]},
        submitted_by="test",
        origin=origin,
    )


def _end(queue: QueueService, output: str, *, failed: bool = False) -> None:
    """A runner takes the job's task, ships its output's tail, then reports its end."""
    holder = runner(queue)
    [lease] = queue.lease(holder.id)
    assert queue.store.record_output(lease.task.id, lease.token, output, queue.clock())
    if failed:
        queue.fail(lease.task.id, lease.token, "exit code 2", exit_code=2)
    else:
        queue.complete(lease.task.id, lease.token, exit_code=0)


def test_a_job_from_an_issue_is_labelled_waiting_then_gets_one_comment_and_its_label(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    job = _submit(queue)
    assert queue.job(job.id).origin == ORIGIN
    assert github.labels_on(ISSUE) == {"watchkeeper:waiting"}
    assert github.comments_on(ISSUE) == []
    clock.advance(90)
    _end(queue, f"step one\napi_key={SECRET}\nall green\n")
    queue.sweep(clock())
    queue.sweep(clock())
    [comment] = github.comments_on(ISSUE)
    assert "succeeded" in comment and "fix it" in comment and job.id in comment
    assert "1 min 30 s" in comment
    assert "step one" in comment and "[redacted]" in comment and SECRET not in comment
    assert f"{PUBLIC}/web/jobs/{job.id}" in comment
    assert github.labels_on(ISSUE) == {"watchkeeper:ready"}


@pytest.mark.parametrize(
    ("last_line", "failed", "label", "said"),
    [
        ("BLOCKED: waiting for review", False, "watchkeeper:blocked", "waiting for review"),
        ("PARKED: back after the freeze", True, "watchkeeper:parked", "back after the freeze"),
        ("DONE", False, "watchkeeper:ready", "Done"),
        ("broke", True, "watchkeeper:failed", "failed"),
    ],
)
def test_the_last_line_of_the_last_task_declares_the_label(
    queue: QueueService,
    github: FakeGitHub,
    clock: ManualClock,
    last_line: str,
    failed: bool,
    label: str,
    said: str,
) -> None:
    _submit(queue)
    _end(queue, f"working\n{last_line}\n", failed=failed)
    queue.sweep(clock())
    assert github.labels_on(ISSUE) == {label}
    [comment] = github.comments_on(ISSUE)
    assert said in comment


def test_a_cancelled_job_says_so_once(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    job = _submit(queue)
    queue.cancel(job.id)
    queue.sweep(clock())
    queue.sweep(clock())
    [comment] = github.comments_on(ISSUE)
    assert "cancelled" in comment
    assert github.labels_on(ISSUE) == {"watchkeeper:failed"}


def test_a_job_without_an_origin_posts_nothing(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    _submit(queue, origin=None)
    _end(queue, "done\n")
    queue.sweep(clock())
    assert github.calls == []


def test_a_malformed_origin_is_refused_saying_how_to_write_it(queue: QueueService) -> None:
    for wrong in ("github:acme/app", "github:acme#1", "gitlab:acme/app#1", "acme/app#1"):
        with pytest.raises(InvalidInput) as refused:
            _submit(queue, origin=wrong)
        assert "github:OWNER/REPO#N" in str(refused.value)


def test_a_post_caught_between_claim_and_answer_is_maybe_posted_never_posted_again(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    job = _submit(queue)
    _end(queue, "all green\n")
    assert queue.results.claim(job.id, clock())  # then the server stopped
    queue.sweep(clock())
    assert github.comments_on(ISSUE) == []
    clock.advance(queue.results.stale_after_s + 1)
    queue.sweep(clock())
    queue.sweep(clock())
    assert github.comments_on(ISSUE) == []
    assert queue.results.state(job.id) == "maybe_fired"


def test_a_refused_token_is_recorded_as_failed_with_the_reason(
    tmp_path: Path, store: Store, clock: ManualClock, github: FakeGitHub
) -> None:
    queue = make_service(tmp_path, store, clock, forge=forge_of(github, token="ghp-wrong"))
    job = _submit(queue)  # the waiting label is refused too: the job is queued anyway
    _end(queue, "ok\n")
    queue.sweep(clock())
    queue.sweep(clock())
    assert queue.results.state(job.id) == "failed"
    error = queue.results.error(job.id)
    assert error is not None and "401" in error and "Bad credentials" in error
    assert github.comments_on(ISSUE) == []
    # The label at submit, the comment at the end: nothing retried.
    assert [method for method, _ in github.calls] == ["POST", "POST"]


def test_two_replicas_sweeping_at_once_post_each_end_once(
    tmp_path: Path, store: Store, clock: ManualClock, github: FakeGitHub
) -> None:
    stores = [Store(store.url) for _ in range(2)]
    try:
        job_ids, failures = _race(tmp_path, stores, clock, github)
    finally:
        for opened in stores:
            opened.close()
    assert failures == []
    comments = github.comments_on(ISSUE)
    assert len(comments) == len(job_ids)
    assert sorted(next(j for j in job_ids if j in c) for c in comments) == sorted(job_ids)


def _race(
    tmp_path: Path, stores: list[Store], clock: ManualClock, github: FakeGitHub
) -> tuple[list[str], list[BaseException]]:
    """Six jobs ended, then every replica sweeps at the same moment; the jobs' ids and
    what the sweeps raised."""
    replicas = [make_service(tmp_path, opened, clock, forge=forge_of(github)) for opened in stores]
    jobs = [_submit(replicas[0], title=f"job {n}") for n in range(6)]
    holder = runner(replicas[0], capacity=10)
    for lease in replicas[0].lease(holder.id, limit=10):
        replicas[0].complete(lease.task.id, lease.token)
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def sweep(replica: QueueService) -> None:
        start.wait()
        try:
            replica.sweep(clock())
        except BaseException as exc:  # noqa: BLE001 - the thread reports it to the test
            failures.append(exc)

    threads = [threading.Thread(target=sweep, args=(replica,)) for replica in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [job.id for job in jobs], failures


def test_a_job_retried_after_its_end_is_labelled_waiting_again_and_its_next_end_posted(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    job = _submit(queue)
    _end(queue, "broke\n", failed=True)
    queue.sweep(clock())
    assert github.labels_on(ISSUE) == {"watchkeeper:failed"}
    queue.retry(job.id)
    assert github.labels_on(ISSUE) == {"watchkeeper:failed", "watchkeeper:waiting"}
    _end(queue, "fixed\nDONE\n")
    queue.sweep(clock())
    queue.sweep(clock())
    first, second = github.comments_on(ISSUE)
    assert "failed" in first and "succeeded" in second and "Done" in second
    assert github.labels_on(ISSUE) == {"watchkeeper:ready"}


def test_jobs_still_running_never_crowd_out_the_end_of_one_that_ended(
    queue: QueueService, github: FakeGitHub, clock: ManualClock
) -> None:
    running = [_submit(queue, title=f"still queued {n}") for n in range(20)]
    ended = _submit(queue, title="ended")
    queue.cancel(ended.id)
    queue.results.batch = 1
    queue.sweep(clock())
    [comment] = github.comments_on(ISSUE)
    assert ended.id in comment
    assert all(queue.results.state(job.id) == "waiting" for job in running)
