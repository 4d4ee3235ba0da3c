"""A job from GitHub retried by an incident's Retry button posts its next end there too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.support.fake_github import FakeGitHub, fake_github
from watchkeeper.clock import ManualClock
from watchkeeper.contract import Action
from watchkeeper.kinds.actions import ActionRequest
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from .test_github_results import ISSUE, _end, _submit, forge_of


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with fake_github() as fake:
        yield fake


@pytest.fixture
def posting(
    tmp_path: Path, store: Store, clock: ManualClock, github: FakeGitHub
) -> Iterator[Runtime]:
    """A server's runtime whose ``[forge]`` posts to the fake GitHub."""
    settings = make_settings(tmp_path, store.url, forge=forge_of(github))
    opened = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    yield opened
    opened.sweeper.close()


def test_a_job_retried_from_its_incident_is_labelled_waiting_and_its_next_end_posted(
    posting: Runtime, github: FakeGitHub, clock: ManualClock
) -> None:
    queue = posting.queue
    job = _submit(queue)
    _end(queue, "broke\n", failed=True)
    queue.sweep(clock())
    assert github.labels_on(ISSUE) == {"watchkeeper:failed"}
    task_id = queue.job(job.id).tasks[0].id
    retry = ActionRequest(Action.RETRY, "task", task_id, 1, "ada", "telegram", "")
    posting.sweeper.adapters["task"].perform(retry)
    assert github.labels_on(ISSUE) == {"watchkeeper:failed", "watchkeeper:waiting"}
    _end(queue, "fixed\nDONE\n")
    queue.sweep(clock())
    first, second = github.comments_on(ISSUE)
    assert "failed" in first and "succeeded" in second
    assert github.labels_on(ISSUE) == {"watchkeeper:ready"}
