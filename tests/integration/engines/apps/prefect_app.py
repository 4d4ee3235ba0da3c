"""A Prefect app as a user writes one, for the engine tests: nothing of watchkeeper in it.

``python prefect_app.py [SUFFIX]`` serves four deployments with ``serve`` (a Prefect runner, which
starts each flow run in a subprocess): ``hang``, ``steps``, ``boom`` and ``ask``. Flows wait on
files ("gates") the test creates. Runs in the interpreter that has Prefect installed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from prefect import flow, get_run_logger, serve, task
from prefect.flow_runs import pause_flow_run


def _wait(gate: str) -> None:
    while not Path(gate).exists():
        time.sleep(0.05)


@task
def step(gate: str, number: int) -> int:
    _wait(f"{gate}.{number}")
    return number


@flow(name="hang")
def hang(gate: str) -> str:
    """Waits for its gate without a word of progress."""
    _wait(f"{gate}.1")
    return "released"


@flow(name="steps")
def steps(gate: str, count: int = 3) -> int:
    """One task run per gate: each is progress."""
    for number in range(1, count + 1):
        step(gate, number)
        get_run_logger().info("step %s done", number)
    return count


@flow(name="boom")
def boom(counter: str) -> None:
    """Fails on its first run, succeeds on the next."""
    marker = Path(counter)
    if not marker.exists():
        marker.touch()
        raise ValueError("cannot parse the page")


@flow(name="ask")
def ask() -> str:
    """Pauses for a person."""
    pause_flow_run(timeout=3600)
    return "approved"


if __name__ == "__main__":
    suffix = sys.argv[1] if len(sys.argv) > 1 else ""
    serve(
        hang.to_deployment(f"hang{suffix}"),
        steps.to_deployment(f"steps{suffix}"),
        boom.to_deployment(f"boom{suffix}"),
        ask.to_deployment(f"ask{suffix}"),
        limit=20,
    )
