"""Secrets stay out of what the real processes print: the server's log and the command line."""

from __future__ import annotations

import re
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from tests.support import patient_http
from tests.support.waiting import TIMEOUT_S
from watchkeeper.redact import MASK
from watchkeeper.runtime import Runtime

from ..integration.fakes.telegram import WEBHOOK_SECRET, fake_telegram
from ..integration.test_no_secret_leaks import (
    ANTHROPIC_KEY,
    GITHUB_TOKEN,
    TELEGRAM_TOKEN,
    _login_at,
    _start,
)
from ..support.cli import WK, cli_env, wk
from ..support.live_server import free_port
from ..support.waiting import wait_for

CHAT = -1001234567890


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
                env=cli_env({"PYTHONUNBUFFERED": "1"}),
            )
        try:
            wait_for(
                lambda: "wk_" in log_file.read_text(), what="the first admin token", timeout=60
            )
            match = re.search(r"wk_[A-Za-z0-9_-]+", log_file.read_text())
            assert match is not None
            headers = {"Authorization": f"Bearer {match.group(0)}"}
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: _answers(f"{base}/healthz"), what="the server listening", timeout=60)
            with httpx.Client(base_url=base, headers=headers, timeout=TIMEOUT_S) as api:
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
        return patient_http.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


# -- the command line ------------------------------------------------------------------------


@pytest.fixture
def cli_config(tmp_path: Path, runtime: Runtime) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f'data_dir = "{runtime.settings.data_dir}"\n'
        f'database_url = "{runtime.settings.resolved_database_url}"\n'
    )
    return file


def test_cli_errors_are_redacted(cli_config: Path, tmp_path: Path) -> None:
    result = wk(
        "--config", str(cli_config), "run", "--timeout", ANTHROPIC_KEY, "--", "true", cwd=tmp_path
    )
    assert result.returncode == 1
    assert "--timeout" in result.stderr and "write a duration" in result.stderr
    assert ANTHROPIC_KEY not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_cli_logs_prints_redacted_output(
    cli_config: Path, runtime: Runtime, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    go.touch()
    run_id = _start(runtime, go)
    # The run's store, read here rather than through a server.
    local = ("--config", str(cli_config), "--store", runtime.settings.resolved_database_url)
    assert wk(*local[:2], "wait", run_id, *local[2:]).returncode == 0
    printed = wk(*local[:2], "logs", run_id, *local[2:])
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == f"start\nkey {MASK} loaded\n"
    followed = wk(*local[:2], "logs", "--follow", run_id, *local[2:])
    assert followed.stdout == f"start\nkey {MASK} loaded\n"
