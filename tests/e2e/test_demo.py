"""``watchkeeper demo``: a card arrives, Retry brings the same limit, and it fails again: a note
under the card, whose buttons come back."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests.support import patient_http

from ..support.live_server import free_port


def test_demo_card_retry_and_a_note_under_the_card(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "watchkeeper",
            "demo",
            "--port",
            str(port),
            "--limit",
            "1",
            "--data-dir",
            str(tmp_path / "demo"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "300"},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True
    )
    reader.start()

    def wait_for(pattern: str) -> str:
        while True:
            line = lines.get(timeout=60)
            if re.search(pattern, line):
                return line

    try:
        token = re.search(r"wk_[A-Za-z0-9_-]+", wait_for(r"WATCHKEEPER_TOKEN=wk_"))
        assert token is not None
        first = wait_for(r"card \d+: .* failed")
        assert "[Retry] [Dismiss] [Ask to diagnose]" in first
        headers = {"Authorization": f"Bearer {token.group(0)}"}
        base = f"http://127.0.0.1:{port}"
        incident = patient_http.get(f"{base}/api/v1/incidents", headers=headers).json()[
            "incidents"
        ][0]
        pressed = patient_http.post(
            f"{base}/api/v1/incidents/{incident['id']}/decide",
            json={"action": "retry", "state_token": incident["state_token"]},
            headers=headers,
            timeout=30,
        )
        assert pressed.json()["outcome"] == "done", pressed.text
        assert "Decided: Retry by @demo" in wait_for(r"update \d+: ")
        again = wait_for(r"card \d+: .* failed again")  # the note: the log posts notes as cards
        assert "time limit of 1 s exceeded" in again
        assert "[Retry]" in wait_for(r"update \d+: .*Failed again at")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        reader.join(timeout=5)
        process.stdout.close()
