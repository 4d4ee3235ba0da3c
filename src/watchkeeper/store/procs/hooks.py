"""The completion-hook journal of ended runs: claimed, settled, reconciled; never fired twice."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select, update

from watchkeeper.clock import to_epoch
from watchkeeper.records.procs import HookState, ProcRun
from watchkeeper.store.base import Accessor
from watchkeeper.store.procs.rows import R as _R
from watchkeeper.store.procs.rows import kept_by, run_from_row
from watchkeeper.store.schema.procs import proc_runs


class Hooks(Accessor):
    """Moves the hook journal forward, one conditional update per move."""

    def due_hooks(self, engine_key: str) -> list[ProcRun]:
        """Ended runs the engine of ``engine_key`` settles whose hooks have not been fired."""
        statement = select(proc_runs).where(
            _R.hook_state == HookState.PENDING.value, kept_by(engine_key)
        )
        with self._read("reading due hooks") as conn:
            return [run_from_row(row) for row in conn.execute(statement)]

    def claim_hook(self, run_id: str, now: datetime) -> bool:
        """``pending`` -> ``firing``, committed before anything fires; ``False`` if lost."""
        moved = self._move_hooks(
            "claiming a completion hook",
            _R.run_id == run_id,
            HookState.PENDING,
            hook_state=HookState.FIRING.value,
            hook_at=to_epoch(now),
        )
        return moved == 1

    def settle_hook(self, run_id: str, state: HookState, error: str | None, now: datetime) -> None:
        """``firing`` -> ``fired`` or ``failed``."""
        self._move_hooks(
            "settling a completion hook",
            _R.run_id == run_id,
            HookState.FIRING,
            hook_state=state.value,
            hook_error=error,
            hook_at=to_epoch(now),
        )

    def reconcile_hooks(self, engine_key: str, claimed_before: float) -> int:
        """Hooks caught ``firing`` since before ``claimed_before`` may have fired: never refire.

        Only the runs of ``engine_key``: an engine of another data folder may be
        firing its own right now. The cut-off keeps a second watchkeeper process
        of the same data folder (a CLI command, say) from marking a hook another
        one is firing right now.
        """
        return self._move_hooks(
            "reconciling completion hooks",
            kept_by(engine_key) & (_R.hook_at < claimed_before),
            HookState.FIRING,
            hook_state=HookState.MAYBE_FIRED.value,
            hook_error="watchkeeper stopped while firing: it may or may not have run",
        )

    def _move_hooks(
        self, action: str, which: ColumnElement[bool], from_state: HookState, **values: Any
    ) -> int:
        """Move the hooks of ``which`` runs still in ``from_state``; how many moved."""
        statement = update(proc_runs).where(which, _R.hook_state == from_state.value)
        with self._write(action) as conn:
            return int(conn.execute(statement.values(**values)).rowcount)
