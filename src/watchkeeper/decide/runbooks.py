"""Automatic first steps, off until switched on, in config (``[runbooks]``) or over the API.

Rules that always hold: at most one automatic step per piece of work per
day; a retry that fails again is never retried by itself; never on work
whose effects are unknown. Every step is a decision by "watchkeeper
(runbook)", recorded and announced like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from watchkeeper.clock import Now
from watchkeeper.config import RunbooksConfig
from watchkeeper.contract import Action, Condition, Effects, RunView
from watchkeeper.decide.actors import Actor
from watchkeeper.decide.decider import Decider, PressResult
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident
from watchkeeper.watch.results import SweepResult

log = logging.getLogger(__name__)
OUT_OF_ATTEMPTS = "out_of_attempts"
ONE_STEP_PER = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Runbook:
    """One kind of problem and the first step taken for it."""

    name: str
    description: str
    action: Action
    matches: Callable[[Incident, RunView], bool]


def _failed_task(incident: Incident, run: RunView) -> bool:
    return (
        incident.key.condition == Condition.FAILED.value
        and incident.key.fingerprint != OUT_OF_ATTEMPTS
    )


def _out_of_attempts(incident: Incident, run: RunView) -> bool:
    return (
        incident.key.condition == Condition.FAILED.value
        and incident.key.fingerprint == OUT_OF_ATTEMPTS
    )


def _abandoned_turn(incident: Incident, run: RunView) -> bool:
    return incident.key.condition == Condition.STUCK.value


RUNBOOKS: dict[str, Runbook] = {
    rb.name: rb
    for rb in (
        Runbook(
            "retry_failed_without_effects",
            "Retry a failed task whose effects are none",
            Action.RETRY,
            _failed_task,
        ),
        Runbook(
            "retry_out_of_attempts",
            "Retry a job that ran out of attempts",
            Action.RETRY,
            _out_of_attempts,
        ),
        Runbook(
            "close_abandoned_turns",
            "Close a chat turn left open with nothing running it",
            Action.CLOSE_TURN,
            _abandoned_turn,
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Switch:
    """Whether a runbook is on, and who said so."""

    runbook: Runbook
    enabled: bool
    source: str  # "config", or who switched it over the API
    changed_at: datetime | None = None


class Runbooks:
    """Evaluates switched-on runbooks against the incidents a sweep opened."""

    def __init__(self, decider: Decider, store: Store, config: RunbooksConfig, clock: Now) -> None:
        self.decider = decider
        self.store = store
        self.config = config
        self.clock = clock

    def switches(self) -> list[Switch]:
        """Every runbook with its state: the API's switch wins over the file."""
        stored = self.store.decisions.runbook_switches()
        config = self.config
        result = []
        for name, runbook in RUNBOOKS.items():
            if name in stored:
                enabled, by, at = stored[name]
                result.append(Switch(runbook, enabled, by, at))
            else:
                result.append(Switch(runbook, bool(getattr(config, name)), "config"))
        return result

    def enabled(self) -> list[Runbook]:
        """The runbooks switched on."""
        return [s.runbook for s in self.switches() if s.enabled]

    def after_sweep(self, result: SweepResult) -> list[PressResult]:
        """Take the first step for incidents this sweep opened or reopened."""
        active = self.enabled()
        if not active:
            return []
        runs = {
            (j.run.kind, j.run.run_id): j.run for items in result.judged.values() for j in items
        }
        taken = []
        for incident_id in (*result.applied.opened, *result.applied.reopened):
            incident = self.store.incidents.get(incident_id)
            run = runs.get((incident.key.kind, incident.key.run_id))
            step = self._step_for(incident, run, active, result.at)
            if step is not None:
                taken.append(self._take(incident, step))
        return taken

    def _step_for(
        self, incident: Incident, run: RunView | None, active: list[Runbook], now: datetime
    ) -> Runbook | None:
        if run is None or run.effects is not Effects.NONE:
            return None
        offered = self.decider.offered(incident, run)
        chosen = next(
            (rb for rb in active if rb.action in offered and rb.matches(incident, run)), None
        )
        if chosen is None:
            return None
        history = self.store.decisions.actions_for_work(incident.key.kind, incident.key.run_id)
        automatic = [a for a in history if a.via == "runbook"]
        if any(a.started_at > now - ONE_STEP_PER for a in automatic):
            return None
        if chosen.action is Action.RETRY and any(a.action == Action.RETRY.value for a in automatic):
            return None  # it was retried automatically and failed again: people decide now
        return chosen

    def _take(self, incident: Incident, runbook: Runbook) -> PressResult:
        outcome = self.decider.press(
            incident.id, runbook.action, incident.state_token, Actor.runbook()
        )
        note = f"runbook {runbook.name}: {outcome.message}"
        self.store.incidents.add_event(incident.id, self.clock(), "runbook", note)
        log.info(
            "Runbook %s on incident %d: %s",
            runbook.name,
            incident.id,
            outcome.outcome.value,
            extra={"action": "runbook"},
        )
        return outcome
