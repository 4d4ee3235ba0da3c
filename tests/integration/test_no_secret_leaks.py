"""No secret reaches a log, a page, an error message or a command's output.

Each exit is exercised through its real path: a ``serve`` subprocess talking to
a fake Telegram, the HTTP API and the dashboard on loopback, and the CLI as a
subprocess.
"""

from __future__ import annotations

import io
import logging
import logging.config
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.redact import MASK
from watchkeeper.runtime import Runtime

from ..support.live_server import LiveServer, live_server
from ..support.waiting import wait_for
from ..support.web_login import log_in

TELEGRAM_TOKEN = "7123456789:AAH" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eD"
GITHUB_TOKEN = "ghp_" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9" * 2


# -- the server's own log ----------------------------------------------------------------------


@pytest.fixture
def safe_logging() -> Iterator[io.StringIO]:
    """The real logging set-up of ``serve`` and ``runner``, undone after the test."""
    from watchkeeper import logsafety

    root = logging.getLogger()
    saved = (
        root.handlers[:],
        root.level,
        logging.getLogRecordFactory(),
        {n: logging.getLogger(n).level for n in logsafety.QUIET},
    )
    stream = io.StringIO()
    root.handlers = [logging.StreamHandler(stream)]
    logsafety.install()
    try:
        yield stream
    finally:
        handlers, level, factory, levels = saved
        root.handlers = handlers
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
        for name, value in levels.items():
            logging.getLogger(name).setLevel(value)


def test_logs_are_redacted_even_through_handlers_configured_later(
    safe_logging: io.StringIO,
) -> None:
    own = io.StringIO()
    # What uvicorn does once serve hands over: its own loggers, handlers and formatters.
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "handlers": {"own": {"class": "logging.StreamHandler", "stream": own}},
            "loggers": {"late": {"handlers": ["own"], "level": "INFO", "propagate": False}},
        }
    )
    try:
        logging.getLogger("late").info("calling %s", f"https://x/bot{TELEGRAM_TOKEN}/getMe")
        try:
            raise RuntimeError(f"refused {GITHUB_TOKEN}")
        except RuntimeError:
            logging.getLogger("late").exception("failed with %s", ANTHROPIC_KEY)
        logging.getLogger("watchkeeper.test").warning("token=%s", "hunter2hunter2")
        logging.getLogger("httpx").info("HTTP Request: POST %s", f"/bot{TELEGRAM_TOKEN}/x")
    finally:
        logging.getLogger("late").handlers.clear()
    written = own.getvalue() + safe_logging.getvalue()
    for secret in (TELEGRAM_TOKEN, GITHUB_TOKEN, ANTHROPIC_KEY, "hunter2hunter2"):
        assert secret not in written, written
    assert "Traceback" in written and "RuntimeError: refused" in written
    assert "HTTP Request" not in written  # the HTTP client's own request log is quiet
    assert logging.getLogger("httpx").getEffectiveLevel() >= logging.WARNING
    assert logging.getLogger("httpcore").getEffectiveLevel() >= logging.WARNING


# -- API errors ----------------------------------------------------------------------------


def test_api_error_messages_are_redacted(runtime: Runtime) -> None:
    with live_server(runtime) as server, server.client() as api:
        answer = api.get(f"/api/v1/runs/crawl/{GITHUB_TOKEN}")
    assert answer.status_code == 404
    assert GITHUB_TOKEN not in answer.text and MASK in answer.json()["error"]["message"]


# -- runs that print a key ------------------------------------------------------------------


SECRET_SCRIPT = """\
import os, sys, time
sys.stdout.write("start\\nkey sk-ant-ap")
sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
with open(sys.argv[2]) as rest:
    sys.stdout.write(rest.read() + " loaded\\n")
sys.stdout.flush()
"""


def _engine(runtime: Runtime) -> ProcEngine:
    return ProcEngine.from_settings(runtime.settings, runtime.store, runtime.clock)


def _start(runtime: Runtime, go: Path) -> str:
    """A detached run printing a key in two writes, the second once ``go`` exists.

    The key is read from files, so that it appears in the run's output only, not its command.
    """
    script, rest = go.parent / "prints_a_key.py", go.parent / "rest_of_key"
    script.write_text(SECRET_SCRIPT)
    rest.write_text(ANTHROPIC_KEY[9:])
    request = LaunchRequest(argv=(sys.executable, str(script), str(go), str(rest)), detach=True)
    return _engine(runtime).start(request).run.run_id


# -- the dashboard -------------------------------------------------------------------------


@contextmanager
def _login(server: LiveServer) -> Iterator[httpx.Client]:
    """A dashboard session, logged in through the login form."""
    with _login_at(server.url, server.tokens["admin"]) as client:
        yield client


@contextmanager
def _login_at(url: str, token: str) -> Iterator[httpx.Client]:
    """A dashboard session on the server at ``url``, logged in with ``token``."""
    with httpx.Client(base_url=url, timeout=30) as client:
        log_in(client, token)
        yield client


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a server-sent event stream."""
    event, data = "message", []
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and data:
            yield event, "\n".join(data)
            event, data = "message", []


def test_dashboard_log_redacts_a_key_split_across_two_writes(
    runtime: Runtime, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    run_id = _start(runtime, go)
    log_path = _engine(runtime).log_path(run_id)
    wait_for(
        lambda: log_path.exists() and b"sk-ant-ap" in log_path.read_bytes(), what="first write"
    )
    with live_server(runtime) as server, _login(server) as web:
        page = web.get(f"/web/procs/{run_id}")
        assert page.status_code == 200
        # The unfinished line waits for the live stream, which starts after the last whole line.
        assert "sk-ant-ap" not in page.text and "start" in page.text
        assert '/log?offset=6"' in page.text  # len("start\n")
        shown: list[str] = []
        # From the start, so the first event proves the first write was read before the second.
        with web.stream("GET", f"/web/procs/{run_id}/log?offset=0") as stream:
            for event, data in _events(stream.iter_lines()):
                if event == "log":
                    shown.append(data)
                    go.touch()
                if event == "end":
                    break
    streamed = "\n".join(shown)
    assert ANTHROPIC_KEY[9:] not in streamed and ANTHROPIC_KEY[20:40] not in streamed
    assert f"key {MASK} loaded" in streamed


def test_dashboard_page_redacts_the_first_part_of_a_log(runtime: Runtime, tmp_path: Path) -> None:
    go = tmp_path / "go"
    go.touch()
    run_id = _start(runtime, go)
    engine = _engine(runtime)
    wait_for(lambda: engine.refresh(run_id).status.ended, what="the run's end", timeout=60)
    with live_server(runtime) as server, _login(server) as web:
        page = web.get(f"/web/procs/{run_id}")
    assert page.status_code == 200
    assert ANTHROPIC_KEY[9:] not in page.text and f"key {MASK} loaded" in page.text
