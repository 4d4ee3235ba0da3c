"""``watchkeeper run -- CMD`` on the embedded store starts without Typer, pydantic,
SQLAlchemy or asyncio, and says, exits and records exactly what the full command does.

Each case runs once through the installed entry point and once through the whole Typer
command line, on one store, and compares what each printed and how it exited; the runs
each recorded are read back through the full store.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ..support.cli import wk
from ..support.cli_probe import FULL_PATH, both_ways, packages, probe
from ..support.waiting import wait_for

#: What starting a process on this host must not load on the fast path.
NOT_NEEDED = {
    "typer",
    "click",
    "pydantic",
    "pydantic_core",
    "sqlalchemy",
    "alembic",
    "asyncio",
    "httpx",
    "rich",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A working folder with a configuration naming only its data folder, and its store
    made by a first run (the full command makes and migrates it)."""
    (tmp_path / "watchkeeper.toml").write_text('data_dir = "data"\n')
    made = wk("--config", "watchkeeper.toml", "run", "--", "true", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    return tmp_path


def _recorded(folder: Path) -> list[dict[str, Any]]:
    listed = wk("ps", "--all", "--json", "--store", "data", cwd=folder)
    assert listed.returncode == 0, listed.stderr
    runs: list[dict[str, Any]] = json.loads(listed.stdout)
    return runs


def test_run_loads_no_framework_database_layer_nor_event_loop(folder: Path) -> None:
    result = probe(folder, {}, "--config", "watchkeeper.toml", "run", "--", "sh", "-c", "exit 4")
    assert result["status"] == 4
    loaded = packages(result["modules"])
    assert NOT_NEEDED.isdisjoint(loaded), sorted(NOT_NEEDED & loaded)
    newest = _recorded(folder)[0]
    assert (newest["argv"], newest["status"], newest["exit_code"]) == (
        ["sh", "-c", "exit 4"],
        "failed",
        4,
    )


def test_a_budget_and_a_timeout_stay_on_the_fast_path(folder: Path) -> None:
    argv = ("run", "--budget", "90s", "--timeout=2h", "--", "true")
    result = probe(folder, {}, "--config", "watchkeeper.toml", *argv)
    assert result["status"] == 0
    loaded = packages(result["modules"])
    assert NOT_NEEDED.isdisjoint(loaded), sorted(NOT_NEEDED & loaded)
    newest = _recorded(folder)[0]
    assert (newest["budget_s"], newest["timeout_s"]) == (90, 7200)


def test_without_a_configuration_it_finds_the_default_folder(tmp_path: Path) -> None:
    made = wk("run", "--", "true", cwd=tmp_path)  # makes .watchkeeper here
    assert made.returncode == 0, made.stderr
    result = probe(tmp_path, {}, "run", "--name", "second", "--", "true")
    assert result["status"] == 0
    assert "sqlalchemy" not in packages(result["modules"])
    listed = wk("ps", "--all", "--json", "--store", ".watchkeeper", cwd=tmp_path)
    assert [run["name"] for run in json.loads(listed.stdout)][:2] == ["second", "true"]


CASES: dict[str, tuple[str, ...]] = {
    "succeeds": ("run", "--", "true"),
    "fails": ("run", "--", "false"),
    "says": ("run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"),
    "signalled": ("run", "--", "sh", "-c", "kill -TERM $$"),
    "named": ("run", "--name", "nightly", "--session", "s-1", "--", "sh", "-c", "echo named"),
    "not found": ("run", "--", "no-such-command-anywhere"),
    "not executable": ("run", "--", "./watchkeeper.toml"),
    "no command": ("run", "--"),
    "no separator": ("run", "true"),
    "budget and timeout": ("run", "--budget", "5m", "--timeout", "2h30m", "--", "true"),
    "unreadable budget": ("run", "--budget", "soon", "--", "true"),
    "zero timeout": ("run", "--timeout=0", "--", "true"),
    "other option": ("run", "--origin", "telegram:1", "--", "true"),
    "unknown option": ("run", "--bogus", "--", "true"),
    "help": ("run", "--help"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_run_says_and_exits_the_same_either_way(folder: Path, name: str) -> None:
    fast, full = both_ways(folder, {}, "--config", "watchkeeper.toml", *CASES[name])
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode,
        full.stdout,
        full.stderr,
    )
    if name in {"says", "signalled", "not found"}:
        assert fast.returncode == {"says": 3, "signalled": 128 + 15, "not found": 1}[name]


def test_a_run_recorded_fast_reads_as_one_recorded_by_the_full_command(folder: Path) -> None:
    argv = (
        "--config",
        "watchkeeper.toml",
        "run",
        "--name",
        "same",
        "--session",
        "s-9",
        "--budget",
        "5m",
        "--timeout",
        "1h30m",
        "--",
        "sh",
        "-c",
        "echo hi; exit 2",
    )
    fast, full = both_ways(folder, {}, *argv)
    assert fast.returncode == full.returncode == 2
    newest, older = _recorded(folder)[:2]
    varying = {
        "id",
        "pid",
        "pid_start",
        "pgid",
        "shim_pid",
        "shim_start",
        "log_path",
        "created_at",
        "started_at",
        "progress_at",
        "finished_at",
        "updated_at",
        "log_mtime",
        "state_token",
    }
    assert {k: v for k, v in newest.items() if k not in varying} == {
        k: v for k, v in older.items() if k not in varying
    }
    assert (older["name"], older["session"], older["status"]) == ("same", "s-9", "failed")
    assert (older["budget_s"], older["timeout_s"]) == (300, 5400)


def test_detach_prints_the_run_id_as_the_full_command_does(folder: Path) -> None:
    fast, full = both_ways(folder, {}, "--config", "watchkeeper.toml", "run", "-d", "--", "true")
    assert fast.returncode == full.returncode == 0
    assert re.fullmatch(r"p-[0-9a-f]{12}\n", fast.stdout), fast.stdout
    assert re.fullmatch(r"p-[0-9a-f]{12}\n", full.stdout), full.stdout
    assert fast.stdout.strip() in {run["id"] for run in _recorded(folder)}


@pytest.mark.parametrize(
    ("what", "config", "env"),
    [
        ("more than data_dir", 'data_dir = "data"\ncheck_interval_s = 5\n', {}),
        ("refused by the model", 'data_dir = "data"\nbogus = 1\n', {}),
        ("another database", 'data_dir = "data"\n', {"WATCHKEEPER_DATABASE_URL": "sqlite:///o.db"}),
    ],
)
def test_what_only_the_full_command_can_tell_goes_there(
    folder: Path, what: str, config: str, env: dict[str, str]
) -> None:
    (folder / "watchkeeper.toml").write_text(config)
    result = probe(folder, env, "--config", "watchkeeper.toml", "run", "--", "true")
    assert "sqlalchemy" in packages(result["modules"]) or "pydantic" in packages(
        result["modules"]
    ), what
    fast, full = both_ways(folder, env, "--config", "watchkeeper.toml", "run", "--", "true")
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode,
        full.stdout,
        full.stderr,
    )


def test_a_store_not_made_yet_is_made_by_the_full_command(tmp_path: Path) -> None:
    (tmp_path / "watchkeeper.toml").write_text('data_dir = "fresh"\n')
    result = probe(tmp_path, {}, "--config", "watchkeeper.toml", "run", "--", "true")
    assert result["status"] == 0
    assert "sqlalchemy" in packages(result["modules"])  # the full store made it
    assert (tmp_path / "fresh" / "watchkeeper.db").is_file()


def test_a_hook_that_came_due_is_fired_as_the_full_command_fires_it(folder: Path) -> None:
    marker = folder / "hook-fired"
    started = wk(
        "--config",
        "watchkeeper.toml",
        "run",
        "-d",
        "--on-done",
        f"touch {marker}",
        "--",
        "true",
        cwd=folder,
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    wait_for(
        lambda: (folder / "data" / "procs" / run_id / "witness.json").exists(),
        what="the detached run's witness",
    )
    assert not marker.exists()  # nothing settled it yet
    fast = subprocess.run(
        [*_entry(), "--config", "watchkeeper.toml", "run", "--", "true"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert fast.returncode == 0, fast.stderr
    assert marker.exists()
    ended = next(run for run in _recorded(folder) if run["id"] == run_id)
    assert ended["hook_state"] == "fired"


def _entry() -> tuple[str, ...]:
    from ..support.cli import WK

    return WK


assert FULL_PATH  # the full command line both_ways compares against
