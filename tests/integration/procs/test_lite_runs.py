"""The standard-library record of runs (``run``'s fast path) moves rows exactly as the store.

The same moves, at the same instants, on two copies of one migrated SQLite file: one
through :class:`ProcStore` (SQLAlchemy), one through :class:`LiteRuns` (``sqlite3``).
Every column of every row must come out the same, and each read the same record, so a
run the fast path recorded is one the server, ``ps`` and the sweep read as their own.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.errors import NotFound
from watchkeeper.procs.moves import RunMoves
from watchkeeper.records.procs import NewProc, ProcStatus, Started
from watchkeeper.store import Store
from watchkeeper.store.lite.procs import LiteRuns, open_lite
from watchkeeper.store.procs import ProcStore
from watchkeeper.store.shipped import shipped_head

from ...conftest import T0

ENGINE = "host-a:/data"


def _new(run_id: str, **given: Any) -> NewProc:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "name": "sleep",
        "argv": ("sleep", "1 2", "ü"),
        "cwd": "/tmp",
        "host": "host-a",
        "user": "me",
        "boot_id": "boot-1",
        "detach": False,
    }
    return NewProc(**{**fields, **given})


def _moves(procs: RunMoves) -> list[Any]:
    """Every move of the protocol, the conditional ones also where they must not apply."""
    at = [T0 + timedelta(seconds=n) for n in range(12)]
    said: list[Any] = []
    said.append(procs.register(_new("p-plain"), at[0], engine_key=ENGINE, witness_key="k1"))
    said.append(
        procs.register(
            _new(
                "p-hooks",
                detach=True,
                budget_s=30.0,
                timeout_s=60.5,
                origin={"platform": "slack", "chat": "C1"},
                session="s-1",
                on_done_cmd="echo done",
                on_done_url="http://x/y",
            ),
            at[0],
        )
    )
    said.append(procs.register(_new("p-old"), at[0], engine_key="host-a"))
    procs.mark_started("p-plain", Started(10, "s10", 11, "s11", 11), at[1])
    procs.mark_started("p-hooks", Started(20, "s20", 21, "s21", 21), at[1])
    said.append(procs.observe_log("p-plain", 0, 1.5, at[2], progressed=False))
    said.append(procs.observe_log("p-plain", 42, 2.5, at[3], progressed=True))
    said.append(procs.note_forged("p-plain", "forged", at[4]))
    said.append(procs.note_forged("p-plain", "again", at[5]))  # a reason is there: no
    procs.request_abort("p-hooks", at[5], "asked to stop", cancel=True)
    procs.request_abort("p-plain", at[5], "timed out", cancel=False)
    said.append([run.run_id for run in procs.active_on(ENGINE)])
    said.append(procs.finish("p-plain", ProcStatus.SUCCEEDED, at[6], exit_code=0))
    said.append(procs.finish("p-plain", ProcStatus.FAILED, at[7], reason="late"))  # ended: no
    said.append(procs.finish("p-hooks", ProcStatus.CANCELLED, at[7], signal=15, finished_at=at[6]))
    said.append(procs.finish("p-old", ProcStatus.FAILED, at[8], exit_code=127, reason="gone"))
    procs.set_started_at("p-old", at[0])
    procs.set_started_at("p-plain", at[9])  # already set: no
    procs.mark_started("p-old", Started(30, "s30", 31, "s31", 31), at[9])  # ended: stays so
    said.append(procs.observe_log("p-old", 7, 3.5, at[10], progressed=True))  # ended: no
    said.append(procs.witness_key("p-plain"))
    said.append(procs.witness_key("p-hooks"))
    said.append(sorted(run.run_id for run in procs.active_on(ENGINE)))
    said.extend(procs.get(run_id) for run_id in ("p-plain", "p-hooks", "p-old"))
    return said


def _rows(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM proc_runs ORDER BY run_id").fetchall()
        return [dict(zip(row.keys(), row, strict=True)) for row in rows]


@pytest.fixture
def two_copies(sqlite_template: Path, tmp_path: Path) -> tuple[Path, Path]:
    full, lite = tmp_path / "full.db", tmp_path / "lite.db"
    shutil.copy(sqlite_template, full)
    shutil.copy(sqlite_template, lite)
    return full, lite


def _both(two_copies: tuple[Path, Path], moves: Callable[[RunMoves], Any]) -> tuple[Any, Any]:
    full_path, lite_path = two_copies
    store = Store(f"sqlite:///{full_path}", migrate=False)
    try:
        by_full = moves(ProcStore(store.engine))
    finally:
        store.close()
    lite = open_lite(lite_path, shipped_head() or "")
    assert lite is not None
    try:
        by_lite = moves(lite)
    finally:
        lite.close()
    return by_full, by_lite


def test_every_move_stores_the_same_row_and_reads_the_same_record(
    two_copies: tuple[Path, Path],
) -> None:
    by_full, by_lite = _both(two_copies, _moves)
    assert by_lite == by_full
    full_rows, lite_rows = (_rows(path) for path in two_copies)
    assert len(full_rows) == 3
    assert lite_rows == full_rows


def test_an_unknown_run_is_not_found_in_the_same_words(two_copies: tuple[Path, Path]) -> None:
    def missing(procs: RunMoves) -> str:
        with pytest.raises(NotFound) as raised:
            procs.get("p-none")
        return f"{type(raised.value).__name__}: {raised.value}"

    by_full, by_lite = _both(two_copies, missing)
    assert by_lite == by_full
    assert "no process run 'p-none'" in by_lite


def test_only_a_current_existing_file_is_opened(sqlite_template: Path, tmp_path: Path) -> None:
    assert open_lite(tmp_path / "absent.db", shipped_head() or "") is None
    assert not (tmp_path / "absent.db").exists()  # never created
    behind = tmp_path / "behind.db"
    shutil.copy(sqlite_template, behind)
    with sqlite3.connect(behind) as db:
        db.execute("UPDATE alembic_version SET version_num = '0001'")
    assert open_lite(behind, shipped_head() or "") is None
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    assert open_lite(empty, shipped_head() or "") is None
    current = open_lite(sqlite_template, shipped_head() or "")
    assert isinstance(current, LiteRuns)
    current.close()
