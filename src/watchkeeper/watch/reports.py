"""Push reports: the write side of the ``push`` kind, for the HTTP API and in-process callers.

What a report describes (the run's title, its step, a failure's reason, fingerprint and
detail) is redacted here, before it is stored: everything read back from a push run (the
runs list, incidents and their cards, the CSV export, the dashboard) is then clean, and
no reader has to redact it again.

The push-run records are defined beside their table (:mod:`watchkeeper.store.runs`)
and re-exported here, so the layers above the services name them without
importing the store.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from watchkeeper.clock import Now, to_epoch
from watchkeeper.config import Settings
from watchkeeper.contract import DEFAULT_LOOP_AFTER, RunStatus
from watchkeeper.contract import fingerprint as failure_fingerprint
from watchkeeper.errors import InvalidInput, NotFound
from watchkeeper.kinds import registry
from watchkeeper.redact import redact
from watchkeeper.store import Store
from watchkeeper.store.runs import NewRun, PushRun

__all__ = ["ALLOWED_CLOCK_SKEW", "NewRun", "PushRun", "Reports"]

#: Reporters' clocks may run a little ahead of ours.
ALLOWED_CLOCK_SKEW = timedelta(seconds=5)


class Reports:
    """Applies reports to push runs, checking kinds and times, and wakes the sweep loop.

    ``wake`` tells the sweep loop of a new deadline (``Sweeper.poke``).
    """

    def __init__(
        self, store: Store, settings: Settings, wake: Callable[[datetime], None], clock: Now
    ) -> None:
        self.store = store
        self.settings = settings
        self.wake = wake
        self.clock = clock

    def get(self, kind: str, run_id: str) -> PushRun:
        """One push run of a push kind (``NotFound`` for any other kind or id)."""
        if kind not in registry.push_kinds(self.settings):
            raise NotFound(f"unknown kind {kind!r}")
        return self.store.runs.get(kind, run_id)

    def running(self, kind: str, now: datetime) -> list[PushRun]:
        """The push runs of ``kind`` that have not ended, as the sweep reads them at ``now``."""
        runs = (
            self.store.runs.get(kind, row.run_id)
            for row in self.store.runs.rows_for_judging(kind, now)
        )
        return [run for run in runs if not run.status.ended]

    def positions(self, finished_since: datetime) -> list[tuple[str, tuple[Any, ...]]]:
        """Where every push run stands, by kind: what changes whenever a run moves.

        Runs that finished before ``finished_since`` are left out.
        """
        return [
            (
                kind,
                tuple(
                    (r.run_id, r.status, r.attempt, r.version)
                    for r in self.store.runs.rows_for_judging(kind, finished_since)
                ),
            )
            for kind in sorted(registry.push_kinds(self.settings))
        ]

    def _check_kind(self, kind: str) -> None:
        kinds = registry.push_kinds(self.settings)
        if kind not in kinds:
            raise NotFound(
                f"unknown kind {kind!r}: report one of {', '.join(sorted(kinds))}, "
                f'or add [kinds.{kind}] with adapter = "push" to watchkeeper.toml'
            )

    def _at(self, at: datetime | None, now: datetime, field: str) -> datetime:
        if at is None:
            return now
        if at - now > ALLOWED_CLOCK_SKEW:
            raise InvalidInput(
                f"{field} {at.isoformat()} is in the future (server time {now.isoformat()}); "
                "send the time the event happened, or leave it out",
                field,
            )
        return at

    def start(self, new: NewRun, started_at: datetime | None = None) -> tuple[PushRun, bool]:
        """Start (or restart) a run; an omitted run id gets a fresh one."""
        self._check_kind(new.kind)
        now = self.clock()
        when = self._at(started_at, now, "started_at")
        new = dataclasses.replace(new, title=redact(new.title))
        if not new.run_id:
            # Lettered: sixteen hex digits can be all decimal and pass Luhn's check, and a
            # run id printed as "[card]" links nowhere.
            new = dataclasses.replace(new, run_id=f"r-{secrets.token_hex(8)}")
        run, changed = self.store.runs.start(new, when)
        self._poke(run)
        return run, changed

    def progress(
        self,
        kind: str,
        run_id: str,
        step: str | None,
        at: datetime | None,
        *,
        done: int | None = None,
        total: int | None = None,
        budget_s: float | None = None,
        expected_s: float | None = None,
    ) -> PushRun:
        """Where the work is: its step, its counters (``done`` of ``total``), and the
        budget and expected time of the step it starts, in force until the next report.

        A report that says what the one before it said (the same step, the same counters)
        is not progress: it counts one more repeat (``loop_after`` of them in a row make
        the run looping). Any other report moves the run; each one resumes waiting work.
        """
        self._check_kind(kind)
        now = self.clock()
        when = self._at(at, now, "at")
        values: dict[str, object] = {
            "status": RunStatus.RUNNING.value,
            "step_budget_s": budget_s,
            "step_expected_s": expected_s,
        }
        if step is not None:
            values["step"] = redact(step)
        if done is not None:
            values["done"] = done
        if total is not None:
            values["total"] = total
        run = self.store.runs.move(kind, run_id, now, values, reported=when)
        self._poke(run)
        return run

    def heartbeat(self, kind: str, run_id: str) -> PushRun:
        """The owner is alive; does not count as progress."""
        self._check_kind(kind)
        run = self.store.runs.move(kind, run_id, self.clock(), {}, counts_as_move=False)
        self._poke(run)
        return run

    def waiting(self, kind: str, run_id: str, reason: str | None) -> PushRun:
        """The work waits for a person: never stalled while it does."""
        self._check_kind(kind)
        # A person's answer comes between: the reports after it are compared afresh.
        values: dict[str, object] = {"status": RunStatus.WAITING.value, "repeats": 0}
        if reason is not None:
            values["step"] = redact(reason)
        return self.store.runs.move(kind, run_id, self.clock(), values)

    def finish(self, kind: str, run_id: str, step: str | None = None) -> PushRun:
        """The work succeeded."""
        return self._end(kind, run_id, RunStatus.SUCCEEDED, {"step": redact(step)} if step else {})

    def cancel(self, kind: str, run_id: str, reason: str | None = None) -> PushRun:
        """The work was cancelled."""
        ended: dict[str, object] = {"step": redact(reason)} if reason else {}
        return self._end(kind, run_id, RunStatus.CANCELLED, ended)

    def fail(
        self, kind: str, run_id: str, reason: str, fingerprint: str | None, detail: str | None
    ) -> PushRun:
        """The work failed; the fingerprint defaults to one derived from the (redacted)
        reason, so a secret that changes from run to run leaves the same failure the same."""
        reason = redact(reason)
        fingerprint = redact(fingerprint) if fingerprint else failure_fingerprint(reason)
        values: dict[str, object] = {
            "failure_reason": reason,
            "failure_fingerprint": fingerprint,
            "detail": None if detail is None else redact(detail),
        }
        return self._end(kind, run_id, RunStatus.FAILED, values)

    def _end(self, kind: str, run_id: str, status: RunStatus, values: dict[str, object]) -> PushRun:
        self._check_kind(kind)
        now = self.clock()
        changes = {**values, "status": status.value, "finished_at": to_epoch(now)}
        run = self.store.runs.move(kind, run_id, now, changes)
        # An ended run's incidents settle at the next sweep; make that now.
        self.wake(now)
        return run

    def _poke(self, run: PushRun) -> None:
        budget = timedelta(
            seconds=run.step_budget_s or run.budget_s or self.settings.budget_for(run.kind)
        )
        last_word = max(run.reported_at or run.progress_at, run.progress_at)
        deadline = min(last_word + budget, run.last_seen_at + timedelta(seconds=run.lease_s))
        if run.repeats >= 2:
            now = self.clock()
            if run.repeats == self._loop_after(run.kind):
                deadline = now  # this very report made it looping
            elif run.progress_at + budget > now:
                # The same reports for a whole budget are looping; once that passed, the
                # sweep that judged it knows, and each further repeat need not wake it.
                deadline = min(deadline, run.progress_at + budget)
        self.wake(deadline)

    def _loop_after(self, kind: str) -> int:
        config = self.settings.kind_configs().get(kind)
        return DEFAULT_LOOP_AFTER if config is None else config.loop_after
