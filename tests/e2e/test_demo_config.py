"""``watchkeeper demo`` with ``--config``: the configured chats, and a port of its own.

The demo runs as a real process; a real ``watchkeeper serve`` holds the
configured port, and the local Telegram fake plays the configured chat.
"""

from __future__ import annotations

import queue
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..integration.fakes.telegram import (
    TOKEN,
    WEBHOOK_SECRET,
    FakeTelegram,
    Stored,
    fake_telegram,
    press,
)
from ..support.cli import WK, cli_env, wk
from ..support.live_server import free_port
from ..support.serving import healthy, serving
from ..support.waiting import wait_for

CHAT = -1005550001


@dataclass
class Demo:
    """A running demo and the lines it printed, read as they come."""

    process: subprocess.Popen[str]
    lines: queue.Queue[str]
    seen: list[str]

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        """The first line from here on matching ``pattern``; fails once ``timeout`` passes."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"the demo printed no line matching {pattern!r}: {self.seen}")
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found


@contextmanager
def demo(config_file: Path, data_dir: Path, *args: str) -> Iterator[Demo]:
    """``watchkeeper --config FILE demo --limit 1 ARGS`` until the block ends, then Ctrl-C."""
    process = subprocess.Popen(
        [
            *WK,
            "--config",
            str(config_file),
            "demo",
            "--limit",
            "1",
            "--data-dir",
            str(data_dir),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(columns=300),
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout or []], daemon=True
    )
    reader.start()
    try:
        yield Demo(process, lines, [])
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        reader.join(timeout=5)
        assert process.stdout is not None
        process.stdout.close()


def test_demo_serves_on_a_free_port_when_serve_holds_the_configured_one(tmp_path: Path) -> None:
    server_config = tmp_path / "serve.toml"
    server_config.write_text(f'data_dir = "{tmp_path / "serve"}"\n')
    with serving(server_config) as (_, server_url, _token):
        held = int(server_url.rsplit(":", 1)[1])
        demo_config = tmp_path / "watchkeeper.toml"
        demo_config.write_text(f"[server]\nport = {held}\n")
        with demo(demo_config, tmp_path / "demo") as running:
            moved = running.wait_for(
                rf"port {held} is in use .*; the demo serves on http://127\.0\.0\.1:(\d+) instead"
            )
            port = int(moved.group(1))
            assert port != held
            # No chat is configured: the card shows in the terminal.
            running.wait_for(r"cards appear below, in the terminal")
            card = running.wait_for(r"card \d+: .* failed").string
            assert "[Retry] [Dismiss] [Ask to diagnose]" in card
            wait_for(lambda: healthy(f"http://127.0.0.1:{port}"), what="the demo's /healthz")
        assert healthy(server_url), "the server that held the port serves on"


def test_a_port_asked_for_that_is_taken_is_explained(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = wk("demo", "--port", str(port), "--data-dir", str(tmp_path / "demo"), timeout=30)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr
    assert "leave --port out" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started
        assert started.invalid == [], "our channel sent something the Bot API would refuse"


def failed_cards(messages: list[Stored]) -> list[Stored]:
    """The cards of a failure not yet decided."""
    return [m for m in messages if "failed" in m.text and "Decided" not in m.text]


def in_chat(fake: FakeTelegram) -> list[Stored]:
    """The chat's messages, for a predicate of ``fake.wait_for`` (which holds the fake's lock)."""
    return fake.chats.get(CHAT, [])


def test_demo_sends_its_cards_to_the_configured_chat(tmp_path: Path, fake: FakeTelegram) -> None:
    config_file = tmp_path / "watchkeeper.toml"
    config_file.write_text(
        f'[telegram]\nbot_token = "{TOKEN}"\nbase_url = "{fake.url}"\n'
        f'webhook_secret = "{WEBHOOK_SECRET}"\n'
        '[admins]\ntelegram = ["42"]\n'
        f'[ops]\nchannels = ["telegram:{CHAT}"]\n'
    )
    port = free_port()
    with demo(config_file, tmp_path / "demo", "--port", str(port)) as running:
        running.wait_for(rf"cards go to telegram:{CHAT}")
        fake.wait_for(lambda f: len(failed_cards(in_chat(f))) == 1, timeout=60)
        (card,) = failed_cards(fake.messages(CHAT))
        assert "swarm_task" in card.text and "time limit of 1 s exceeded" in card.text
        (retry,) = [d for d in card.callback_data if d.split(":")[2] == "r"]
        # Retry pressed in the chat reaches the demo's webhook; the card says who decided. The
        # retried task fails again: a note under the card, whose buttons come back.
        pressed = press(f"http://127.0.0.1:{port}", fake.callback_update(card, retry, 42, "ana"))
        assert pressed.status_code == 200, pressed.text
        fake.wait_for(lambda f: len(in_chat(f)) == 2 and bool(in_chat(f)[0].buttons), timeout=60)
        first, note = fake.messages(CHAT)
        assert first.message_id == card.message_id and "Failed again at" in first.text
        assert note.reply_to == card.message_id and "failed again" in note.text
        assert not note.buttons
