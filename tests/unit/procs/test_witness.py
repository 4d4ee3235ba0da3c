"""The witness file: atomic, and never trusted when it does not say how the run ended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from watchkeeper.procs import witness
from watchkeeper.procs.witness import Witness, WitnessCorrupt


def test_round_trip_and_absent(tmp_path: Path) -> None:
    assert witness.read(tmp_path, "p-1") is None
    witness.write(tmp_path, Witness("p-1", 3, None, 1700000000.5))
    assert witness.read(tmp_path, "p-1") == Witness("p-1", 3, None, 1700000000.5)
    assert [p.name for p in tmp_path.iterdir()] == [witness.WITNESS_NAME]  # no temporary left


def test_signal_witness() -> None:
    found = Witness("p-1", None, 9, 1.0)
    assert not found.succeeded
    assert Witness("p-1", 0, None, 1.0).succeeded


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"run_id": "p-1", "exit_co', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (json.dumps({"run_id": "p-2", "exit_code": 0, "ended_at": 1}).encode(), "not the witness"),
        (
            json.dumps({"run_id": "p-1", "exit_code": 0, "signal": 9, "ended_at": 1}).encode(),
            "exactly one of",
        ),
        (json.dumps({"run_id": "p-1", "exit_code": 0}).encode(), "needs ended_at"),
        (
            json.dumps({"run_id": "p-1", "exit_code": "0", "ended_at": 1}).encode(),
            "must be integers",
        ),
    ],
)
def test_truncated_or_corrupt_witness_is_refused(
    tmp_path: Path, content: bytes, message: str
) -> None:
    (tmp_path / witness.WITNESS_NAME).write_bytes(content)
    with pytest.raises(WitnessCorrupt, match=message):
        witness.read(tmp_path, "p-1")
