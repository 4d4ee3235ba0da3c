"""An RQ app as a user writes one, for the engine tests: nothing of watchkeeper in it.

``python -m rq_app NAME QUEUE`` runs a real RQ worker (``rq.Worker``, forking a work horse per
job) on ``WK_TEST_REDIS``. Jobs wait on Redis lists ("gates") the test pushes to.
"""

from __future__ import annotations

import os
import sys

import redis
from rq import Queue, Worker, get_current_job

URL = os.environ.get("WK_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _redis() -> redis.Redis:
    return redis.Redis.from_url(URL)


def hang(gate: str) -> str:
    """Waits for its gate without a word of progress."""
    _redis().blpop([gate], timeout=600)
    return "released"


def steps(gate: str, count: int) -> int:
    """Records one step in ``job.meta`` each time its gate opens."""
    job = get_current_job()
    assert job is not None
    for done in range(1, count + 1):
        _redis().blpop([gate], timeout=600)
        job.meta["done"] = done
        job.save_meta()
    return count


def boom(what: str) -> None:
    """Fails at once."""
    raise ValueError(f"cannot parse {what}")


def flaky(counter: str) -> int:
    """Fails on its first run, succeeds on the next."""
    runs = int(_redis().incr(counter))
    if runs == 1:
        raise RuntimeError("the first attempt fails")
    return runs


if __name__ == "__main__":
    name, queue = sys.argv[1], sys.argv[2]
    connection = _redis()
    Worker([Queue(queue, connection=connection)], connection=connection, name=name).work()
