"""Engine workers as real subprocesses, each in a process group of its own.

A test that kills a worker kills its whole group with SIGKILL, the way a host's OOM killer or
a lost machine ends it: no clean shutdown, no last word to the engine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

APPS = Path(__file__).resolve().parents[1] / "integration" / "engines" / "apps"


def app_env(extra: Mapping[str, str]) -> dict[str, str]:
    """The test's environment, with the engines' test apps importable and ``extra`` set."""
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(APPS), env.get("PYTHONPATH")]))
    return env


@contextmanager
def worker(
    argv: Sequence[str], env: Mapping[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``python -m argv...`` in its own session, output to ``log``; stop its group after."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", *argv],
            env=app_env(env),
            cwd=APPS,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            kill_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                kill_group(process, signal.SIGKILL)
                process.wait()
            kill_group(process, signal.SIGKILL)  # children a clean stop left behind


def kill_group(process: subprocess.Popen[bytes], sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to the worker's whole process group, if it is still there."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
