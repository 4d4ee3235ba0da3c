"""One press, from any channel: checked, decided once, journalled, then carried out.

The order matters. A press is recorded whatever happens to it. Only admins
act. A press against an old state token does nothing. The decision is one
conditional UPDATE committed together with the journal row, before the
kind's function runs; the function's answer is journalled afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from functools import partial

from watchkeeper.clock import Now
from watchkeeper.config import AdminsConfig
from watchkeeper.contract import Action, Condition, Effects, RunView
from watchkeeper.decide.actors import Actor, via_label
from watchkeeper.decide.crowd import Answer, Ask, Crowds, Later
from watchkeeper.decide.diagnose import Diagnoser
from watchkeeper.decide.offer import DECIDING, JOURNALLED, buttons, label
from watchkeeper.decide.turns import Turns
from watchkeeper.errors import InvalidInput, WatchkeeperError
from watchkeeper.kinds.actions import ActionFailed, ActionRequest
from watchkeeper.kinds.base import Adapter
from watchkeeper.redact import redact
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionRecord, ActionStatus, Claim, ClaimResult, Press
from watchkeeper.store.incidents import Decision, Incident, IncidentStatus

log = logging.getLogger(__name__)
#: An address in a kind's answer; internal ones must not reach a chat.
_ADDRESS = re.compile(r"\b(?:https?|wss?)://\S+")
#: The most of a kind's words about a failed action that people are shown.
MAX_WORDS = 300


class Outcome(StrEnum):
    """What came of a press."""

    DONE = "done"  # won, and the kind's function succeeded
    FAILED = "failed"  # won, but the kind's function failed: the decision stands
    DISMISSED = "dismissed"
    DIAGNOSED = "diagnosed"
    ALREADY_DECIDED = "already_decided"
    STALE = "stale"
    REFUSED = "refused"
    NOT_OFFERED = "not_offered"


@dataclass(frozen=True, slots=True)
class PressResult:
    """The answer to a press, in words and in parts."""

    outcome: Outcome
    message: str
    incident_id: int
    action: Action
    decision: Decision | None = None
    action_record: ActionRecord | None = None
    diagnosis: str | None = None

    @property
    def won(self) -> bool:
        """Whether this press decided the incident."""
        return self.outcome in {Outcome.DONE, Outcome.FAILED, Outcome.DISMISSED}


@dataclass(frozen=True, slots=True)
class Claimed:
    """A press that made its claim: won (its action still to carry out) or beaten to it."""

    incident: Incident
    action: Action
    state_token: str
    actor: Actor
    adapter: Adapter | None
    result: ClaimResult
    #: The decision the claim made, should it have won.
    decision: Decision


def parse_action(value: str) -> Action:
    """An action from user input, or a message listing the valid ones."""
    try:
        return Action(value)
    except ValueError:
        valid = ", ".join(a.value for a in Action)
        raise InvalidInput(f"unknown action {value!r}: use one of {valid}", "action") from None


def failure_words(exc: ActionFailed) -> str:
    """Why an action failed, for people: the kind's own words on one line, with no address
    and no secret in them, cut to a sentence's length (a body that is not words, an error
    page say, is in the journal whole)."""
    words = redact(" ".join(_ADDRESS.sub("(an address)", exc.words).split()))
    return words if len(words) <= MAX_WORDS else words[: MAX_WORDS - 1] + "…"


def decided_message(decision: Decision) -> str:
    """``already decided: Retry by @ana on Slack at 14:02 UTC``."""
    return (
        f"already decided: {label(decision.action)} by {decision.actor} "
        f"on {via_label(decision.via)} at {decision.at:%H:%M} UTC"
    )


class Decider:
    """Decides incidents for every channel through one function.

    ``adapters`` is read at every press, so a kind added to the mapping later
    is acted on too; ``admins`` says which chat users may act; ``replica``
    names this replica in the action journal.
    """

    def __init__(
        self,
        store: Store,
        adapters: Mapping[str, Adapter],
        admins: AdminsConfig,
        clock: Now,
        diagnoser: Diagnoser,
        *,
        replica: str | None = None,
    ) -> None:
        self.store = store
        self.adapters = adapters
        self.admins = admins
        self.clock = clock
        self.diagnoser = diagnoser
        self.host = socket.gethostname()
        #: Journalled with each action, so other replicas recover it once this one is gone.
        self.replica = replica
        self._turns = Turns()
        self._crowds: Crowds[PressResult] = Crowds(self.press_together)

    def offered(
        self,
        incident: Incident,
        run: RunView | None = None,
        journal: Sequence[ActionRecord] | None = None,
    ) -> list[Action]:
        """The buttons ``incident`` shows now; ``journal``: its action journal, when the
        caller read it already (a routing pass reads every incident's at once)."""
        adapter = self.adapters.get(incident.key.kind)
        capabilities = adapter.capabilities() if adapter else frozenset()
        effects = run.effects if run is not None else Effects(incident.effects)
        if incident.decision is None and self._last_action_interrupted(incident, journal):
            # It may have happened: acting again is for someone who looked at the work first.
            effects = Effects.UNKNOWN
        return buttons(
            Condition(incident.key.condition),
            effects,
            capabilities,
            decided=incident.decision is not None,
            resolved=incident.status is IncidentStatus.RESOLVED,
        )

    def _last_action_interrupted(
        self, incident: Incident, journal: Sequence[ActionRecord] | None
    ) -> bool:
        if journal is None:
            journal = self.store.decisions.actions_for_incident(incident.id)
        return bool(journal) and journal[-1].status is ActionStatus.INTERRUPTED

    def press(
        self, incident_id: int, action: Action | str, state_token: str | None, actor: Actor
    ) -> PressResult:
        """Handle one press; every outcome is recorded, at most one press ever wins."""
        chosen = parse_action(action) if isinstance(action, str) else action
        incident = self.store.incidents.get(incident_id, with_events=chosen is Action.DIAGNOSE)
        if chosen is Action.DIAGNOSE:
            return self._diagnose(incident, actor)
        step = self._judge(incident, chosen, state_token, actor)
        if isinstance(step, Claimed):
            return self.finish(step)
        press, result = step
        self.store.decisions.record_press(press)
        return result

    async def press_async(
        self, incident_id: int, action: Action | str, state_token: str | None, actor: Actor
    ) -> PressResult:
        """:meth:`press` from the event loop: presses of one incident arriving together are
        judged from one read and their losses recorded in one write (see :class:`Crowds`)."""
        chosen = parse_action(action) if isinstance(action, str) else action
        if chosen is Action.DIAGNOSE:
            return await asyncio.to_thread(self.press, incident_id, chosen, state_token, actor)
        return await self._crowds.press(incident_id, Ask(chosen, state_token, actor))

    def press_together(self, incident_id: int, asks: Sequence[Ask]) -> list[Answer[PressResult]]:
        """Judge presses of one incident that all arrived before this call, in order.

        One read of the incident serves them all: once one of them decides it (or
        the read finds it decided), the others lose to that decision without
        another read. The losses are recorded in one transaction before this
        returns; a winner's action is left to :meth:`finish`. A press that cannot
        be judged (no state token on an undecided card) gets its own error.
        """
        incident: Incident | None = None
        answers: list[Answer[PressResult]] = []
        losses: list[Press] = []
        lost_at: list[int] = []
        for ask in asks:
            try:
                if incident is None:
                    incident = self.store.incidents.get(incident_id, with_events=False)
                step = self._judge(incident, ask.action, ask.state_token, ask.actor)
            except WatchkeeperError as exc:
                answers.append(exc)
                continue
            if isinstance(step, Claimed):
                if step.result.won:
                    # Every later press arrived before this commit: it lost to this decision.
                    incident = replace(step.incident, decision=step.decision)
                    answers.append(Later(partial(self.finish, step)))
                else:
                    # Another process decided first: explained from a read of its own.
                    answers.append(self.finish(step))
                    incident = None
                continue
            press, result = step
            losses.append(press)
            lost_at.append(len(answers))
            answers.append(result)
        if losses:
            try:
                self.store.decisions.record_presses(losses)
            except WatchkeeperError as exc:
                # Unrecorded, the losses are not answered as judged; a winner's claim, made
                # and committed, stands and its action is still carried out.
                for index in lost_at:
                    answers[index] = exc
        return answers

    def _judge(
        self, incident: Incident, chosen: Action, state_token: str | None, actor: Actor
    ) -> tuple[Press, PressResult] | Claimed:
        """A loss to record (and its answer), or the claim this press made."""
        early = self._early_loss(incident, chosen, actor)
        if early is not None:
            return self._loss(incident, chosen, state_token, actor, *early)
        if not state_token:
            raise InvalidInput(
                "state_token is required: send the token shown with the incident", "state_token"
            )
        with self._turns.turn(incident.id) as waited:
            if waited:
                # Another press of this card went first here and has most likely decided it:
                # this one is answered from a read, without queueing for the write lock.
                incident = self.store.incidents.get(incident.id, with_events=False)
                early = self._early_loss(incident, chosen, actor)
            if early is None:
                adapter = self.adapters.get(incident.key.kind)
                early = self._check(incident, chosen, state_token, adapter)
            if early is None:
                result, now = self._claim_in_turn(incident, chosen, state_token, actor)
        if early is not None:
            return self._loss(incident, chosen, state_token, actor, *early)
        decision = Decision(chosen.value, actor.name, actor.via, now)
        return Claimed(incident, chosen, state_token, actor, adapter, result, decision)

    def _early_loss(
        self, incident: Incident, chosen: Action, actor: Actor
    ) -> tuple[Outcome, str] | None:
        """Why a press loses whatever its token says, or ``None``."""
        if not actor.is_admin:
            return Outcome.REFUSED, (
                f"only admins act: {actor.name} is not an admin on {via_label(actor.via)}"
            )
        if incident.decision is not None:
            return Outcome.ALREADY_DECIDED, decided_message(incident.decision)
        if incident.status is IncidentStatus.RESOLVED:
            why = f"nothing to decide: the incident is resolved ({incident.resolution})"
            return Outcome.STALE, why
        return None

    def _check(
        self, incident: Incident, chosen: Action, state_token: str, adapter: Adapter | None
    ) -> tuple[Outcome, str] | None:
        """Why an undecided incident's press loses (the work moved, not offered), or ``None``."""
        run = self._current(adapter, incident)
        moved = state_token != incident.state_token or (
            run is not None and run.state_token != state_token
        )
        if moved:
            return Outcome.STALE, (
                "the work has moved on since this was shown (it progressed, ended or was "
                "retried); look again before acting"
            )
        offered = self.offered(incident, run)
        if chosen not in offered:
            names = ", ".join(label(a) for a in offered)
            return Outcome.NOT_OFFERED, (
                f"{label(chosen)} is not offered for this incident; offered: {names}"
            )
        return None

    def _current(self, adapter: Adapter | None, incident: Incident) -> RunView | None:
        if adapter is None:
            return None
        try:
            return adapter.read_one(incident.key.run_id, self.clock())
        except WatchkeeperError as exc:
            raise WatchkeeperError(
                f"cannot check {incident.key.kind} run {incident.key.run_id} before acting: {exc}; "
                "try again when the kind can be read"
            ) from exc

    def _claim_in_turn(
        self, incident: Incident, action: Action, state_token: str, actor: Actor
    ) -> tuple[ClaimResult, datetime]:
        assert action in DECIDING
        now = self.clock()
        claim = Claim(
            incident_id=incident.id,
            action=action.value,
            actor=actor.name,
            via=actor.via,
            state_token=state_token,
            dismiss=action is Action.DISMISS,
            journal=action in JOURNALLED,
            host=self.host,
            pid=os.getpid(),
            resolution=f"dismissed by {actor.name}" if action is Action.DISMISS else None,
            replica=self.replica,
        )
        return self.store.decisions.claim(claim, incident.key.kind, incident.key.run_id, now), now

    def finish(self, claimed: Claimed) -> PressResult:
        """After a claim: a winner's action carried out and journalled, a loser told why."""
        incident, action, actor = claimed.incident, claimed.action, claimed.actor
        if not claimed.result.won:
            return self._explain_loss(incident.id, action, claimed.state_token, actor)
        decision = claimed.decision
        if action is Action.DISMISS:
            message = "dismissed: this failure of this work will not be reported again"
            return PressResult(Outcome.DISMISSED, message, incident.id, action, decision)
        assert claimed.result.action_id is not None
        assert claimed.adapter is not None
        return self._carry_out(
            incident, action, actor, claimed.adapter, claimed.result.action_id, decision
        )

    def _carry_out(
        self,
        incident: Incident,
        action: Action,
        actor: Actor,
        adapter: Adapter,
        action_id: int,
        decision: Decision,
    ) -> PressResult:
        request = ActionRequest.for_press(
            action,
            incident.key.kind,
            incident.key.run_id,
            incident.id,
            actor.name,
            actor.via,
            incident.reason,
        )
        words: str | None = None
        try:
            answer = redact(adapter.perform(request))
            status, outcome, event = ActionStatus.DONE, Outcome.DONE, "action_done"
            log.info(
                "Action %s on incident %d done; the kind answered: %s",
                action.value,
                incident.id,
                answer or "(nothing)",
                extra={"action": "decide"},
            )
        except ActionFailed as exc:
            answer, status, outcome, event = (
                redact(str(exc)),
                ActionStatus.FAILED,
                Outcome.FAILED,
                "action_failed",
            )
            words = failure_words(exc)
            log.warning(
                "Action %s on incident %d failed: %s",
                action.value,
                incident.id,
                answer,
                extra={"action": "decide"},
            )
        # The kind's answer is kept in the journal and the log; people are told a sentence,
        # since a body may name internal hosts, ids and keys, and a runbook's step is
        # announced to the whole chat.
        self.store.decisions.finish_action(
            action_id, status, answer or label(action), self.clock(), event, words
        )
        record = next(
            a for a in self.store.decisions.actions_for_incident(incident.id) if a.id == action_id
        )
        if words is not None:
            message = f"{label(action)} failed: {words}; its buttons are offered again"
        else:
            message = f"{label(action)} done"
        return PressResult(outcome, message, incident.id, action, decision, record)

    def _explain_loss(
        self, incident_id: int, action: Action, state_token: str, actor: Actor
    ) -> PressResult:
        incident = self.store.incidents.get(incident_id, with_events=False)
        if incident.decision is not None:
            message = decided_message(incident.decision)
            return self._lose(
                incident, action, state_token, actor, Outcome.ALREADY_DECIDED, message
            )
        why = "the work has moved on since this was shown; look again before acting"
        return self._lose(incident, action, state_token, actor, Outcome.STALE, why)

    def _lose(
        self,
        incident: Incident,
        action: Action,
        state_token: str | None,
        actor: Actor,
        outcome: Outcome,
        message: str,
    ) -> PressResult:
        press, result = self._loss(incident, action, state_token, actor, outcome, message)
        self.store.decisions.record_press(press)
        return result

    def _loss(
        self,
        incident: Incident,
        action: Action,
        state_token: str | None,
        actor: Actor,
        outcome: Outcome,
        message: str,
    ) -> tuple[Press, PressResult]:
        """A losing press's row for the history, and its answer."""
        press = Press(
            incident.id,
            self.clock(),
            actor.name,
            actor.via,
            action.value,
            state_token,
            outcome.value,
            message,
        )
        return press, PressResult(outcome, message, incident.id, action, incident.decision)

    def _diagnose(self, incident: Incident, actor: Actor) -> PressResult:
        same_work = [
            live
            for live in self.store.incidents.live([incident.key.kind])
            if live.key.run_id == incident.key.run_id
        ]
        diagnosis = self.diagnoser.diagnose(incident, self.offered(incident), same_work)
        now = self.clock()
        self.store.decisions.record_press(
            Press(
                incident.id,
                now,
                actor.name,
                actor.via,
                Action.DIAGNOSE.value,
                None,
                Outcome.DIAGNOSED.value,
                diagnosis.source,
            )
        )
        self.store.incidents.add_event(incident.id, now, "diagnosis", diagnosis.text)
        return PressResult(
            Outcome.DIAGNOSED,
            diagnosis.text,
            incident.id,
            Action.DIAGNOSE,
            incident.decision,
            diagnosis=diagnosis.text,
        )
