"""A Celery app as a user writes one, for the engine tests: nothing of watchkeeper in it.

``WK_TEST_BROKER`` is the broker; ``WK_TEST_BACKEND`` the result backend (empty: none).
Tasks wait on Redis lists ("gates") the test pushes to, so a test decides when each moves.
"""

from __future__ import annotations

import os

import redis
from celery import Celery, Task

BROKER = os.environ["WK_TEST_BROKER"]
BACKEND = os.environ.get("WK_TEST_BACKEND", BROKER)

app = Celery("wk_test_app", broker=BROKER, backend=BACKEND or None)
app.conf.update(
    task_track_started=True,
    result_extended=True,
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)


def _redis() -> redis.Redis:
    return redis.Redis.from_url(BROKER)


@app.task(name="hang")
def hang(gate: str) -> str:
    """Waits for its gate without a word of progress."""
    _redis().blpop([gate], timeout=600)
    return "released"


@app.task(bind=True, name="steps")
def steps(self: Task, gate: str, count: int) -> int:
    """Reports one step of progress each time its gate opens."""
    for done in range(1, count + 1):
        _redis().blpop([gate], timeout=600)
        self.update_state(state="PROGRESS", meta={"done": done, "of": count})
    return count


@app.task(name="boom")
def boom(what: str) -> None:
    """Fails at once."""
    raise ValueError(f"cannot parse {what}")


@app.task(name="flaky")
def flaky(counter: str) -> int:
    """Fails on its first run, succeeds on the next."""
    runs = int(_redis().incr(counter))
    if runs == 1:
        raise RuntimeError("the first attempt fails")
    return runs
