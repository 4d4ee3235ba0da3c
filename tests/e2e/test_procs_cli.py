"""The process commands as a user types them: exit statuses, bad input, clear errors.

``run`` starts work on this host from the configuration; the other commands read
that store here with ``--store`` (tests/e2e/test_procs_over_server.py has them
over a server).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.procs.engine import ProcEngine

from ..support.cli import wk


@pytest.fixture
def config(engine: ProcEngine, tmp_path: Path) -> Path:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(f'data_dir = "{engine.data_dir}"\ndatabase_url = "{engine.store.url}"\n')
    return file


def local(engine: ProcEngine, command: str, *args: str) -> tuple[str, ...]:
    """``command`` reading the test's own store, not a server."""
    return (command, *args, "--store", engine.store.url)


def test_run_wait_status_and_logs(config: Path, engine: ProcEngine) -> None:
    foreground = wk("--config", str(config), "run", "--", "sh", "-c", "echo out; exit 7")
    assert foreground.returncode == 7 and "out" in foreground.stdout
    started = wk(
        "--config",
        str(config),
        "run",
        "--detach",
        "--name",
        "quick",
        "--",
        "sh",
        "-c",
        "echo hi; exit 3",
    )
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    waited = wk("--config", str(config), *local(engine, "wait", run_id))
    assert waited.returncode == 3, waited.stderr
    assert "exited with status 3" in waited.stdout
    assert wk("--config", str(config), *local(engine, "logs", run_id)).stdout == "hi\n"
    status = wk("--config", str(config), *local(engine, "status", run_id))
    assert "failed" in status.stdout and "quick" in status.stdout
    listed = wk("--config", str(config), *local(engine, "ps", "--all"))
    assert run_id in listed.stdout
    assert "already_exited" in wk("--config", str(config), *local(engine, "abort", run_id)).stdout
    assert "reclaimed: none" in wk("--config", str(config), *local(engine, "reclaim")).stdout


def test_a_missing_command_or_unknown_run_is_a_clear_error(
    config: Path, engine: ProcEngine
) -> None:
    missing = wk("--config", str(config), "run", "--", "no-such-command-here")
    assert missing.returncode == 1
    assert "error: command 'no-such-command-here' not found on PATH" in missing.stderr
    assert "Traceback" not in missing.stderr
    assert engine.procs.runs(active_only=False) == []  # nothing recorded, nothing running
    unknown = wk("--config", str(config), *local(engine, "abort", "p-unknown"))
    assert unknown.returncode == 1 and "no process run 'p-unknown'" in unknown.stderr
    bad = wk("--config", str(config), "run", "--timeout", "soon", "--", "true")
    assert bad.returncode == 1 and "write a duration like" in bad.stderr


def test_park_and_parked(config: Path, engine: ProcEngine) -> None:
    run_id = wk("--config", str(config), "run", "--detach", "--", "true").stdout.strip()
    parked = wk(
        "--config",
        str(config),
        *local(engine, "park", "--session", "s-1", "--until", run_id, "--reason", "suite"),
    )
    assert parked.returncode == 0, parked.stderr
    shown = wk("--config", str(config), *local(engine, "parked"))
    assert "s-1" in shown.stdout and run_id in shown.stdout


def test_status_says_how_the_tree_was_contained_and_what_was_ended(
    config: Path, engine: ProcEngine
) -> None:
    # The leader exits at once; its grandchild left the group and would have run on alone.
    script = "setsid sleep 300 & exit 0"
    started = wk("--config", str(config), "run", "--detach", "--", "sh", "-c", script)
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.strip()
    assert wk("--config", str(config), *local(engine, "wait", run_id)).returncode == 0
    shown = wk("--config", str(config), *local(engine, "status", run_id))
    assert "containment  subreaper" in shown.stdout, shown.stdout
    # Named as it was when ended: `setsid` itself if caught before it became `sleep`.
    ended = next(line for line in shown.stdout.splitlines() if "ended_descendants" in line)
    assert "(pid " in ended and "SIGTERM" in ended, shown.stdout
