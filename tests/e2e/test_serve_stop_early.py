"""A stop signal that reaches ``serve`` at any moment of its start-up stops it cleanly.

A process manager (or a test, or a person at Ctrl-C) may signal ``serve`` before it has
finished starting. Before, a signal in the gap between the banner and uvicorn's own
handlers raised ``KeyboardInterrupt`` wherever the main thread stood (exit 130, and once a
server that went on serving, its signal lost). Now the signal is recorded from the first
line of ``serve`` on and handed to the HTTP server, which stops as soon as it has started.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from ..support.cli import WK, cli_env
from ..support.live_server import free_port

#: Lines ``serve`` prints as it starts, one in each of its stages (the store opening, the gap
#: between the banner and the HTTP server, the app's start-up): a signal is sent as it appears.
STAGES = (
    "Created the database schema",
    "watchkeeper serving on",
    "Waiting for application startup",
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("stage", STAGES)
def test_a_stop_signal_at_any_stage_of_start_up_is_a_clean_stop(
    tmp_path: Path, stage: str, signum: signal.Signals
) -> None:
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    process = subprocess.Popen(
        [*WK, "--config", str(config), "serve", "--port", str(free_port())],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
    )
    assert process.stdout is not None
    seen: list[str] = []
    for line in process.stdout:
        seen.append(line)
        if stage in line:
            process.send_signal(signum)
            break
    try:
        rest, _ = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        rest, _ = process.communicate()
        pytest.fail(f"serve went on after {signum.name} at {stage!r}:\n{''.join(seen)}{rest}")
    log = "".join(seen) + rest
    assert process.returncode == 0, log
    assert "Traceback" not in log
    assert "KeyboardInterrupt" not in log
