"""The ``push`` kind: work that reports itself to watchkeeper's API.

The owner is a lease: alive while a heartbeat or progress report arrives
within ``lease_s``. A lapsed lease makes running work stuck.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from datetime import UTC, datetime
from typing import Any

from watchkeeper.contract import (
    Effects,
    Failure,
    KindRead,
    Owner,
    OwnerKind,
    RunStatus,
    RunView,
    origin_of,
)
from watchkeeper.kinds.base import FINISHED_WINDOW, Adapter
from watchkeeper.store.runs import state_token

_STATUS = {status.value: status for status in RunStatus}
_EFFECTS = {effects.value: effects for effects in Effects}


class PushAdapter(Adapter):
    """Reads push runs of one kind from watchkeeper's own store."""

    adapter_name = "push"

    def read(self, now: datetime) -> Sequence[RunView]:
        """Active runs and those that ended within the last day."""
        store = self.own_store()
        rows = store.runs.rows_for_judging(self.name, now - FINISHED_WINDOW, reports=True)
        return self._views(rows, now)

    def read_for_sweep(self, now: datetime, watched: Set[str]) -> KindRead:
        """Only the runs that may have a verdict (and the watched ones), found by the store."""
        store = self.own_store()
        found = store.runs.sweep_rows(
            self.name,
            now,
            now - FINISHED_WINDOW,
            self.spec.budget_s,
            self.spec.expected_s,
            watched,
            self.spec.loop_after,
        )
        deadline = None if found.deadline is None else datetime.fromtimestamp(found.deadline, UTC)
        return KindRead(
            self.name, tuple(self._views(found.rows, now)), total=found.total, deadline=deadline
        )

    def read_one(self, run_id: str, now: datetime) -> RunView | None:
        """One push run by id, straight from the store."""
        row = self.own_store().runs.row_for_judging(self.name, run_id)
        return None if row is None else self._views([row], now)[0]

    def evidence(self, run_id: str) -> dict[str, str]:
        """The failure detail a reporter sent, if any."""
        run = self.stored_run(run_id)
        if run is None:
            return {}
        facts = {"attempt": str(run.attempt), "last_seen_at": run.last_seen_at.isoformat()}
        if run.detail:
            facts["detail"] = run.detail
        return facts

    def _views(self, rows: Sequence[Any], now: datetime) -> list[RunView]:
        now_s = now.timestamp()
        kind = self.name
        fromts = datetime.fromtimestamp
        views = []
        for row in rows:
            (
                run_id,
                title,
                status,
                attempt,
                version,
                origin,
                effects,
                budget_s,
                expected_s,
                lease_s,
                started_at,
                progress_at,
                seen_at,
                finished_at,
                step,
                failure_reason,
                failure_fingerprint,
                reported_at,
                repeats,
                step_budget_s,
                step_expected_s,
                done,
                total,
            ) = row
            expires = seen_at + lease_s
            views.append(
                RunView(
                    kind=kind,
                    run_id=run_id,
                    title=title,
                    status=_STATUS[status],
                    state_token=state_token(attempt, version),
                    owner=Owner(OwnerKind.LEASE, None, expires > now_s, fromts(expires, UTC)),
                    progress_at=fromts(progress_at, UTC),
                    started_at=fromts(started_at, UTC),
                    finished_at=None if finished_at is None else fromts(finished_at, UTC),
                    expected_s=expected_s,
                    budget_s=budget_s,
                    origin=origin_of(origin),
                    effects=_EFFECTS.get(effects, Effects.UNKNOWN),
                    failure=None
                    if failure_reason is None
                    else Failure(failure_reason, failure_fingerprint or ""),
                    step=step,
                    reported_at=None if reported_at is None else fromts(reported_at, UTC),
                    repeats=repeats,
                    step_budget_s=step_budget_s,
                    step_expected_s=step_expected_s,
                    done=done,
                    total=total,
                )
            )
        return views
