"""Bad input refused before anything runs, and records that stay consistent.

The same commands typed at the command line are in ``tests/e2e/test_procs_cli.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.errors import InvalidInput
from watchkeeper.procs import layout
from watchkeeper.procs.engine import ProcEngine
from watchkeeper.procs.errors import LaunchFailed
from watchkeeper.procs.launch import LaunchRequest
from watchkeeper.records.procs import ProcStatus


def test_a_missing_working_folder_is_refused(engine: ProcEngine, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        engine.start(LaunchRequest(("true",), cwd=str(tmp_path / "nowhere")))
    assert engine.procs.runs(active_only=False) == []


def test_an_unwritable_data_folder_is_refused(engine: ProcEngine, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    broken = ProcEngine(engine.store, blocker / "data")
    with pytest.raises(LaunchFailed, match="choose a writable data_dir"):
        broken.start(LaunchRequest(("true",)))
    assert engine.procs.runs(active_only=False) == []


def test_a_corrupt_witness_fails_the_run_with_the_reason(engine: ProcEngine) -> None:
    launched = engine.start(LaunchRequest(("true",)), tee=False)
    assert launched.shim is not None
    launched.shim.wait()  # the shim is gone; nobody has read its witness yet
    layout.witness_path(engine.data_dir, launched.run.run_id).write_bytes(b'{"run_id": "p-')
    engine.reap()
    done = engine.get(launched.run.run_id)
    assert done.status is ProcStatus.FAILED and done.exit_code is None
    assert done.reason is not None and "witness is unreadable" in done.reason
