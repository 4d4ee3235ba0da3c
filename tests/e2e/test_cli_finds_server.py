"""Where the command line looks: a server it names, never a store it quietly creates.

Each command runs as a real subprocess from an empty folder with no
``WATCHKEEPER_*`` variables, as a newcomer would run it from the wrong place.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..support.cli import wk
from ..support.live_server import free_port

DEFAULT_URL = "http://127.0.0.1:8750"

#: Commands that read what the server knows.
READING = [
    ("runs",),
    ("runs", "--json"),
    ("show", "crawl/r-1"),
    ("token", "create", "--role", "viewer"),
    ("token", "list"),
    ("token", "revoke", "1"),
    ("incidents",),
    ("status", "p-1"),
    ("ps",),
    ("logs", "p-1"),
    ("wait", "p-1"),
    ("parked",),
    ("report", "start", "crawl", "a crawl"),
]


def bare_env() -> dict[str, str]:
    """This environment without any ``WATCHKEEPER_*`` setting (``wk`` adds it on top)."""
    return {name: "" for name in os.environ if name.startswith("WATCHKEEPER_")}


@pytest.fixture
def empty_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


@pytest.fixture
def default_port_refused() -> Iterator[bool]:
    """Hold the default port bound but not listening, so a connection to it is refused.

    Yields whether that worked: on a machine where a real server listens there,
    that server answers and only the "creates nothing" half can be checked.
    """
    sock = socket.socket()
    try:
        sock.bind(("127.0.0.1", 8750))
    except OSError:
        sock.close()
        yield False
        return
    try:
        yield True
    finally:
        sock.close()


@pytest.mark.parametrize("args", READING, ids=lambda a: " ".join(a))
def test_no_server_is_said_plainly_and_nothing_is_created(
    args: tuple[str, ...], empty_folder: Path, default_port_refused: bool
) -> None:
    result = wk(*args, cwd=empty_folder, env=bare_env())
    assert list(empty_folder.iterdir()) == [], "a reading command created files"
    assert "Needs attention (0)" not in result.stdout
    if not default_port_refused:
        return
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    said = " ".join(result.stderr.split())
    assert f"cannot reach watchkeeper at {DEFAULT_URL} (from the default)" in said
    assert "--server URL" in said and "WATCHKEEPER_URL" in said
    assert "HTTP 0" not in said, "no HTTP answer came: there is no status to quote"


def test_the_config_file_names_the_server(empty_folder: Path, tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "watchkeeper.toml"
    config.write_text(f"[server]\nport = {port}\n")
    result = wk("runs", cwd=empty_folder, env={**bare_env(), "WATCHKEEPER_CONFIG": str(config)})
    assert result.returncode != 0
    said = " ".join(result.stderr.split())
    assert (
        f"cannot reach watchkeeper at http://127.0.0.1:{port} (from [server] of {config})" in said
    )
    assert str(config) in said
    assert list(empty_folder.iterdir()) == []


def test_the_flag_beats_the_environment(empty_folder: Path) -> None:
    env = {**bare_env(), "WATCHKEEPER_URL": "http://127.0.0.1:9"}
    port = free_port()
    result = wk("runs", "--server", f"http://127.0.0.1:{port}", cwd=empty_folder, env=env)
    assert result.returncode != 0
    said = " ".join(result.stderr.split())
    assert f"cannot reach watchkeeper at http://127.0.0.1:{port} (from --server)" in said


def test_a_missing_store_is_not_created(empty_folder: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-data"
    result = wk("runs", "--store", str(missing), cwd=empty_folder, env=bare_env())
    assert result.returncode != 0
    assert f"no watchkeeper store at {missing}" in " ".join(result.stderr.split())
    assert not missing.exists()
    assert list(empty_folder.iterdir()) == []
