"""``serve --access-log`` writes one access line a request, redacted, and no logging error."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from tests.support import patient_http

from ..support.cli import WK, cli_env
from ..support.live_server import free_port
from ..support.serving import healthy
from ..support.waiting import wait_for

SECRET = "hunter2hunter2hunter2"
KEY = "sk-ant-api03-" + "Zq3xW9vT8sR7pQ6oN5mL4kJ3iH2gF1eDcBa9" * 2


def test_access_lines_are_written_redacted(tmp_path: Path) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    port = free_port()
    log_file = tmp_path / "serve.log"
    with log_file.open("wb") as sink:
        server = subprocess.Popen(
            [*WK, "--config", str(config), "serve", "--port", str(port), "--access-log"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=cli_env({"PYTHONUNBUFFERED": "1"}),
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: healthy(url), what="the server answering /healthz", timeout=60)
        assert patient_http.get(f"{url}/healthz?token={SECRET}").status_code == 200
        assert patient_http.get(f"{url}/api/v1/runs?key={KEY}").status_code == 401
        wait_for(lambda: "/api/v1/runs?key=" in log_file.read_text(), what="the access line")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
    log = log_file.read_text()
    assert "--- Logging error ---" not in log and "Traceback" not in log, log
    assert re.search(r'"GET /healthz\?token=\[redacted\] HTTP/1\.1" 200', log), log
    assert re.search(r'"GET /api/v1/runs\?key=\[redacted\] HTTP/1\.1" 401', log), log
    assert SECRET not in log and KEY[13:40] not in log
