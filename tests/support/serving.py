"""A real ``watchkeeper serve`` on a free port, for the end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from . import patient_http
from .cli import WK, cli_env
from .live_server import free_port
from .waiting import wait_for

#: The repository, where the README's commands are run.
ROOT = Path(__file__).resolve().parents[2]


def healthy(url: str) -> bool:
    """Whether the server at ``url`` answers ``/healthz`` with 200."""
    try:
        return patient_http.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def serving(
    config_file: Path, log: list[str] | None = None, *, as_the_readme_says: bool = False
) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """Start ``serve`` on a fresh data folder; yields the process, its URL and first admin token.

    ``as_the_readme_says``: started as a newcomer starts it, with the README's ``make serve``
    in the repository and the file named by ``WATCHKEEPER_CONFIG``; the file's ``[server]
    port`` is where it serves. The process is then ``make``, whose server is its child.

    A server still running at the end is killed; stop it first to test a graceful stop.
    Every line the server prints is added to ``log`` when one is given.
    """
    kept = log if log is not None else []
    if as_the_readme_says:
        port = int(tomllib.loads(config_file.read_text(encoding="utf-8"))["server"]["port"])
        argv = ["make", "--no-print-directory", "-C", str(ROOT), "serve"]
        env = cli_env({"WATCHKEEPER_CONFIG": str(config_file)})
    else:
        port = free_port()
        argv = [*WK, "--config", str(config_file), "serve", "--port", str(port)]
        env = cli_env()
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert process.stdout is not None
    token = None
    for line in process.stdout:
        kept.append(line)
        if line.strip().startswith("wk_"):
            token = line.strip()
        if "watchkeeper serving on" in line:
            break
    assert token is not None, "a new data folder prints its first admin token:\n" + "".join(kept)
    # Keep draining the server's log so a full pipe never blocks it.
    drain = threading.Thread(target=lambda: kept.extend(process.stdout or []), daemon=True)
    drain.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url), what="the server answering /healthz", timeout=10)
        yield process, url, token
    finally:
        if process.poll() is None:
            # The whole group: under make the server is make's child.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
        drain.join(timeout=5)
        process.stdout.close()


@contextmanager
def served_then_stopped(config_file: Path) -> Iterator[tuple[str, str]]:
    """:func:`serving`, yielding its URL and admin token, stopped gracefully (SIGINT) at the end."""
    with serving(config_file) as (process, url, token):
        yield url, token
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)
