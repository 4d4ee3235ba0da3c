"""No secret reaches a log, a page, an error message or a command's output.

Each exit is exercised through its real path: a ``serve`` subprocess talking to
a fake Telegram, the HTTP API and the dashboard on loopback, and the CLI as a
subprocess.
"""

from __future__ import annotations

import io
import logging
import logging.config
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.redact import MASK
from watchkeeper.runtime import Runtime

from .fakes.telegram import WEBHOOK_SECRET, fake_telegram
from .server import LiveServer, free_port, live_server

WK = [sys.executable, "-m", "watchkeeper"]
TELEGRAM_TOKEN = "7123456789:AAH" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eD"
GITHUB_TOKEN = "ghp_" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9"
ANTHROPIC_KEY = "sk-ant-api03-" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9" * 2
CHAT = -1001234567890


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    """Wait for a real event (a file, a message, a process); never for a verdict."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


# -- the server's own log ----------------------------------------------------------------------


def test_serve_log_never_carries_the_bot_token(tmp_path: Path) -> None:
    with fake_telegram() as fake:
        fake.token = TELEGRAM_TOKEN
        port = free_port()
        config = tmp_path / "watchkeeper.toml"
        config.write_text(
            f'data_dir = "{tmp_path / "data"}"\ncheck_interval_s = 0.2\n'
            f'[telegram]\nbot_token = "{TELEGRAM_TOKEN}"\nbase_url = "{fake.url}"\n'
            f'webhook_secret = "{WEBHOOK_SECRET}"\n'
        )
        log_file = tmp_path / "serve.log"
        with log_file.open("wb") as sink:
            server = subprocess.Popen(
                [*WK, "--config", str(config), "serve", "--port", str(port)],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env={**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1"},
            )
        try:
            wait_until(lambda: "wk_" in log_file.read_text(), "the first admin token")
            match = re.search(r"wk_[A-Za-z0-9_-]+", log_file.read_text())
            assert match is not None
            headers = {"Authorization": f"Bearer {match.group(0)}"}
            base = f"http://127.0.0.1:{port}"
            wait_until(lambda: _answers(f"{base}/healthz"), "the server listening")
            with httpx.Client(base_url=base, headers=headers, timeout=10) as api:
                started = api.post(
                    "/api/v1/runs",
                    json={
                        "kind": "swarm_task",
                        "run_id": "t-leak",
                        "title": "leak check",
                        "effects": "none",
                        "origin": {"platform": "telegram", "chat_id": str(CHAT)},
                        "started_at": (datetime.now(UTC) - timedelta(minutes=5)).isoformat(),
                    },
                )
                assert started.status_code in (200, 201), started.text
                # The work itself printed a credential into its failure reason.
                reason = f"crash: push refused for {GITHUB_TOKEN}"
                failed = api.post("/api/v1/runs/swarm_task/t-leak/fail", json={"reason": reason})
                assert failed.status_code == 200, failed.text
            fake.wait_for(
                lambda f: any("push refused for" in m.text for m in f.chats.get(CHAT, [])),
                timeout=60,
            )
            assert all(GITHUB_TOKEN not in m.text for m in fake.messages(CHAT))
            with _login_at(base, match.group(0)) as web:
                home = web.get("/web/")
            assert home.status_code == 200 and "leak check" in home.text
            assert GITHUB_TOKEN not in home.text
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
        assert fake.invalid == []
    log = log_file.read_text()
    assert "Uvicorn running" in log or "Application startup complete" in log, log
    assert TELEGRAM_TOKEN not in log
    assert TELEGRAM_TOKEN.split(":")[1] not in log, log


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


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


# -- the command line ------------------------------------------------------------------------


def wk(config: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*WK, "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200"},
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def cli_config(tmp_path: Path, runtime: Runtime) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f'data_dir = "{runtime.settings.data_dir}"\n'
        f'database_url = "{runtime.settings.resolved_database_url}"\n'
    )
    return file


def test_cli_errors_are_redacted(cli_config: Path, tmp_path: Path) -> None:
    result = wk(cli_config, "run", "--timeout", ANTHROPIC_KEY, "--", "true", cwd=tmp_path)
    assert result.returncode == 1
    assert "--timeout" in result.stderr and "write a duration" in result.stderr
    assert ANTHROPIC_KEY not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


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


def test_cli_logs_prints_redacted_output(
    cli_config: Path, runtime: Runtime, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    go.touch()
    run_id = _start(runtime, go)
    assert wk(cli_config, "wait", run_id).returncode == 0
    printed = wk(cli_config, "logs", run_id)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == f"start\nkey {MASK} loaded\n"
    followed = wk(cli_config, "logs", "--follow", run_id)
    assert followed.stdout == f"start\nkey {MASK} loaded\n"


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
        form = client.get("/web/login")
        nonce = re.search(r'name="nonce" value="([^"]+)"', form.text)
        assert nonce is not None
        done = client.post("/web/login", data={"nonce": nonce.group(1), "token": token})
        assert done.status_code == 303, done.text
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
    wait_until(lambda: log_path.exists() and b"sk-ant-ap" in log_path.read_bytes(), "first write")
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
    wait_until(lambda: engine.refresh(run_id).status.ended, "the run's end")
    with live_server(runtime) as server, _login(server) as web:
        page = web.get(f"/web/procs/{run_id}")
    assert page.status_code == 200
    assert ANTHROPIC_KEY[9:] not in page.text and f"key {MASK} loaded" in page.text
