"""A program's output: captured from stdout and stderr, redacted before it reaches the disk,
rotated by size, and read back from an offset as a follower does."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.programs.output import read_log
from watchkeeper.store import Store

from ...support.waiting import wait_for_async
from .conftest import running, script, wait_state

pytestmark = pytest.mark.anyio

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
TALKER = f"""
print("hello from stdout", flush=True)
print("token {SECRET[:10]}", end="", file=sys.stderr, flush=True)
time.sleep(0.05)
print("{SECRET[10:]} split in two writes", file=sys.stderr, flush=True)
for i in range(int(sys.argv[1])):
    print(f"line {{i:04d}} " + "x" * 90, flush=True)
mark("done")
time.sleep(300)
"""


def log_path(tmp_path: Path, name: str) -> Path:
    return tmp_path / "data" / "programs" / name / "output.log"


async def test_output_is_captured_and_a_secret_is_redacted_even_when_split_across_writes(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "talker": {
            "command": [*script(tmp_path, "talker", TALKER), "3"],
            "start_s": 0,
            "environment": {"MARKS": str(tmp_path / "marks")},
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs) as host:
        await wait_state(host, "talker", "running")
        path = log_path(tmp_path, "talker")
        await wait_for_async(lambda: path.exists() and "line 0002" in path.read_text())
    text = path.read_text()
    assert "hello from stdout" in text
    assert "token [redacted] split in two writes" in text
    assert SECRET not in text and SECRET[10:] not in text
    assert text.splitlines()[0] == "[watchkeeper] started, pid " + text.split("pid ")[1].split()[0]


async def test_the_log_is_rotated_by_size_and_read_from_an_offset(
    tmp_path: Path, sqlite_store: Store
) -> None:
    programs = {
        "talker": {
            "command": [*script(tmp_path, "talker", TALKER), "100"],
            "start_s": 0,
            "log_max_mb": 0.004,
            "log_backups": 2,
            "environment": {"MARKS": str(tmp_path / "marks")},
        }
    }
    async with running(tmp_path, sqlite_store, programs=programs):
        path = log_path(tmp_path, "talker")
        await wait_for_async(lambda: (tmp_path / "marks").exists())
        await wait_for_async(lambda: path.exists() and "line 0099" in path.read_text())
        first = read_log(path, None, 200)
        whole = read_log(path, 0, 1)
        after = read_log(path, whole.next_offset, 1)
    rotated = sorted(p.name for p in path.parent.iterdir())
    assert rotated == ["output.log", "output.log.1", "output.log.2"]
    assert path.stat().st_size <= 0.004 * 2**20
    assert first.text.endswith("x" * 90 + "\n") and first.text.startswith("line ")
    assert whole.next_offset == whole.size and whole.text.endswith("\n")
    assert (after.text, after.next_offset) == ("", whole.size)
    rotated_since = read_log(path, 10**9, 1)  # past the end: rotated since, read from 0
    assert rotated_since.next_offset == rotated_since.size
    assert rotated_since.text == path.read_text()
