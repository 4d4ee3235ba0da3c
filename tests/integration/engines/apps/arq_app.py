"""An arq app as a user writes one, for the engine tests: nothing of watchkeeper in it.

``python -m arq_app QUEUE JOB_TIMEOUT_S`` runs a real arq worker on ``WK_TEST_REDIS``. Jobs
wait on Redis lists ("gates") the test pushes to.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from arq.connections import RedisSettings
from arq.worker import run_worker

URL = os.environ.get("WK_TEST_REDIS", "redis://127.0.0.1:6379/0")


async def hang(ctx: dict[str, Any], gate: str) -> str:
    """Waits for its gate without a word of progress."""
    await ctx["redis"].blpop([gate], timeout=600)
    return "released"


async def boom(ctx: dict[str, Any], what: str) -> None:
    """Fails at once."""
    raise ValueError(f"cannot parse {what}")


async def flaky(ctx: dict[str, Any], counter: str) -> int:
    """Fails on its first run, succeeds on the next."""
    runs = int(await ctx["redis"].incr(counter))
    if runs == 1:
        raise RuntimeError("the first attempt fails")
    return runs


class WorkerSettings:
    """What ``arq arq_app.WorkerSettings`` would read."""

    functions = [hang, boom, flaky]
    redis_settings = RedisSettings.from_dsn(URL)
    allow_abort_jobs = True
    max_tries = 1
    poll_delay = 0.05


if __name__ == "__main__":
    queue, timeout = sys.argv[1], float(sys.argv[2])
    run_worker(WorkerSettings, queue_name=queue, job_timeout=timeout)  # type: ignore[arg-type]
