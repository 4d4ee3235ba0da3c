"""Ask to diagnose: what happened, the likely cause, the safest next step, in a few sentences.

The default diagnoser is rule-based, deterministic and offline. With
``[diagnose] base_url`` and ``model`` set, an OpenAI-compatible endpoint is
asked instead (with read-only tools only), and the rules answer whenever it
fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from watchkeeper.clock import Now
from watchkeeper.config import DiagnoseConfig
from watchkeeper.contract import Action, Condition, Effects, RunStatus, RunView
from watchkeeper.decide.evidence import Evidence, gather
from watchkeeper.decide.offer import DECIDING, label
from watchkeeper.kinds.base import Adapter
from watchkeeper.redact import redact
from watchkeeper.store.incidents import Incident, IncidentStatus

log = logging.getLogger(__name__)

#: Recognisable causes in failure reasons and log tails, most specific first.
#: Short words and codes match only on their own ("oom" is not in "zoom", "429" not in
#: "14290"); ``oom`` may run into ``kill``, as in OOMKilled and oom_kill.
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"(?i)out of memory|(?<![a-z0-9])oom(?:[-_ ]?kill(?:ed|er)?)?(?![a-z0-9])"
            r"|killed by signal 9|memoryerror"
        ),
        "it ran out of memory",
    ),
    (
        re.compile(r"(?i)rate.?limit|(?<![0-9])429(?![0-9])|too many requests|quota"),
        "a rate limit or quota of a service it calls",
    ),
    (re.compile(r"(?i)timed? ?out|timeout|deadline exceeded"), "a call that timed out"),
    (
        re.compile(
            r"(?i)connection (refused|reset)|unreachable|name or service not known"
            r"|(?<![a-z])dns(?![a-z])"
        ),
        "a service it needs could not be reached",
    ),
    (
        re.compile(r"(?i)permission denied|forbidden|(?<![0-9])40[13](?![0-9])|unauthori[sz]ed"),
        "missing permissions or expired credentials",
    ),
    (re.compile(r"(?i)no space left|disk full|enospc"), "a full disk"),
)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A few sentences, and where they came from (``rules`` or ``model:NAME``)."""

    text: str
    source: str


#: How an open incident's condition reads, followed by when it began.
_IS = {
    Condition.FAILED: "failed at",
    Condition.STUCK: "has been stuck since",
    Condition.STALLED: "has been stalled since",
    Condition.LOOPING: "has been looping since",
    Condition.SLOW: "has been slow since",
}
#: How a settled incident's condition reads, followed by when it began.
_WAS = {
    Condition.FAILED: "failed at",
    Condition.STUCK: "was stuck from",
    Condition.STALLED: "was stalled from",
    Condition.LOOPING: "was looping from",
    Condition.SLOW: "was slow from",
}


def _when(value: datetime | None) -> str:
    return "an unknown time" if value is None else f"{value:%Y-%m-%d %H:%M} UTC"


def _cause_in(*texts: str | None) -> str | None:
    for text in texts:
        if not text:
            continue
        for pattern, cause in _CAUSES:
            if pattern.search(text):
                return cause
    return None


def rule_based(evidence: Evidence) -> str:
    """The deterministic diagnosis: what the work is now, the likely cause, the next step.

    An incident that was resolved, or whose work moved again, is described as
    the work is now, not as it was when the incident opened; the next step
    names only buttons in ``evidence.offered``.
    """
    incident, run = evidence.incident, evidence.run
    condition = Condition(incident.key.condition)
    settled = incident.status is not IncidentStatus.OPEN
    what = _what(evidence, condition) if settled else _what_open(evidence, condition)
    if evidence.read_error:
        what += f" Its kind cannot be read right now ({evidence.read_error})."
    detail = evidence.facts.get("detail") or evidence.facts.get("log_tail")
    found = _cause_in(run.failure.reason if run and run.failure else None, detail, incident.reason)
    if incident.status is IncidentStatus.RESOLVED:
        cause = _cause_now(run, found)
        verdict = evidence.verdict
        if not cause and verdict is not None and verdict.paged:
            # The work is in trouble again, in another way: the cause of that trouble.
            cause = _likely_cause(verdict.condition, evidence, found)
    elif incident.status is IncidentStatus.RECOVERED:
        cause = "It moved again, so whatever held it has let go for now."
    else:
        cause = _likely_cause(condition, evidence, found)
    step = _next_step(condition, evidence)
    text = " ".join(part for part in (what, cause, step) if part)
    if detail:
        last = [line for line in detail.strip().splitlines() if line.strip()][-2:]
        if last:
            text += " Last output: " + " | ".join(line.strip()[:160] for line in last)
    return redact(text)


def _what_open(evidence: Evidence, condition: Condition) -> str:
    incident = evidence.incident
    return (
        f"{incident.title} ({incident.key.kind} {incident.key.run_id}) {_IS[condition]} "
        f"{_when(incident.since)}: {incident.reason}."
    )


def _what(evidence: Evidence, condition: Condition) -> str:
    """A resolved or recovered incident: what it was, then what the work is now."""
    incident = evidence.incident
    was = (
        f"{incident.title} ({incident.key.kind} {incident.key.run_id}) {_WAS[condition]} "
        f"{_when(incident.since)} ({incident.reason})"
    )
    if incident.status is IncidentStatus.RESOLVED:
        was += f"; the incident was resolved at {_when(incident.resolved_at)}"
        if incident.resolution:
            was += f": {incident.resolution}"
    was += "."
    return f"{was} {_now(evidence)}"


def _now(evidence: Evidence) -> str:
    """The work as it is now: ended, or judged as the sweep would judge it, and the
    incident open for it now, if another one is."""
    run, verdict, other = evidence.run, evidence.verdict, evidence.open_now
    if run is None:
        return "" if evidence.read_error else "Its kind no longer reports this work."
    step = f" (last step: {run.step!r})" if run.step else ""
    if run.status.ended:
        now = f"Now it has ended: {run.status.value} at {_when(run.finished_at)}{step}"
    elif verdict is not None:
        now = (
            f"Now it is {verdict.condition.value} ({verdict.reason.rstrip('.')}), "
            f"last moved at {_when(run.progress_at)}{step}"
        )
    else:
        now = f"Now it is {run.status.value}, last moved at {_when(run.progress_at)}{step}"
    if other is not None:
        now += (
            f"; incident {other.id} is open for it ({other.key.condition} since "
            f"{_when(other.since)})"
        )
    return now + "."


def _cause_now(run: RunView | None, found: str | None) -> str:
    if run is None or run.status is not RunStatus.FAILED:
        return ""
    if found:
        return f"The likely cause of its failure is {found}."
    return "Its own report gives the reason it failed; nothing more specific is recorded."


def _likely_cause(condition: Condition, evidence: Evidence, found: str | None) -> str:
    run, incident = evidence.run, evidence.incident
    if condition is Condition.FAILED:
        seen = (
            f" This failure has been seen {incident.episodes} times for this work."
            if incident.episodes > 1
            else ""
        )
        return (
            f"The likely cause is {found}."
            if found
            else "Its own report gives the reason above; nothing more specific is recorded."
        ) + seen
    if condition is Condition.STUCK:
        return (
            "Its owner stopped reporting, so the process or worker running it most likely died "
            "or lost its connection; nothing will finish this work by itself."
        )
    if condition is Condition.LOOPING:
        return (
            "It keeps reporting, but every report says the same thing, so it is most likely "
            "repeating one call or step that never gets further (a retry without end, a tool "
            "call that answers the same every time)."
        )
    step = f" (last step: {run.step!r})" if run is not None and run.step else ""
    owner = (
        "Its owner is still alive"
        if run is None or run.owner.alive
        else "Its owner's liveness cannot be told"
    )
    base = f"{owner} but nothing has moved since {_when(run.progress_at if run else None)}{step}"
    return base + (
        f"; the likely cause is {found}."
        if found
        else ", so it is probably waiting on something that never answers "
        "(a hung call, a lock, a slow dependency)."
    )


def _next_step(condition: Condition, evidence: Evidence) -> str:
    """The safest next step, naming only the buttons offered now."""
    incident, run, offered = evidence.incident, evidence.run, frozenset(evidence.offered)
    if not offered & DECIDING:
        return _nothing_to_decide(incident, evidence.open_now)
    effects = run.effects if run is not None else Effects(incident.effects)
    if incident.status is IncidentStatus.RECOVERED:
        return "Nothing needs doing while it keeps moving; if it stops again, it will be reported."
    if condition is Condition.STUCK and Action.CLOSE_TURN in offered:
        return (
            "The safest next step is to close the turn so nobody is left waiting, "
            "then look at why its worker died."
        )
    if condition is Condition.LOOPING:
        stop = "cancel the work" if Action.CANCEL in offered else "stop it in its own system"
        return (
            f"The safest next step is to look at what it repeats in the owner's log: {stop} "
            "if it is going round in circles, or dismiss this if the repeats are on purpose."
        )
    if condition is Condition.STALLED:
        hung = (
            "cancel the work if it is hung"
            if Action.CANCEL in offered
            else "stop it in its own system if it is hung"
        )
        return (
            f"The safest next step is to look at the owner's log: {hung}, "
            "or dismiss this if it is only slow and will recover."
        )
    if effects is Effects.UNKNOWN:
        if Action.RETRY_CHECKED in offered:
            return (
                "It may already have sent or written something, so check its effects before "
                "retrying (use Retry (I checked its effects))."
            )
        return (
            "It may already have sent or written something: check its effects, start it again "
            "in its own system if that is safe, and dismiss this once it is dealt with."
        )
    if Action.RETRY in offered:
        return "It changed nothing outside, so a retry is safe once the cause is fixed."
    return (
        "It changed nothing outside, so starting it again in its own system is safe once the "
        "cause is fixed; dismiss this once it is dealt with."
    )


def _nothing_to_decide(incident: Incident, open_now: Incident | None) -> str:
    if incident.status is IncidentStatus.RESOLVED:
        if open_now is not None:
            return (
                f"Nothing is left to decide on this incident: decide on incident {open_now.id}, "
                "which is open for the work now."
            )
        return (
            "Nothing is left to decide on this incident; if the work needs attention again, "
            "a new message will ask."
        )
    decision = incident.decision
    if decision is not None:
        return (
            f"Nothing is left to decide: {label(decision.action)} was chosen by "
            f"{decision.actor} at {decision.at:%H:%M} UTC."
        )
    return "Nothing can be decided on this incident from here."


class Diagnoser:
    """Answers "Ask to diagnose": a model when configured, the rules otherwise or on failure."""

    def __init__(self, adapters: Mapping[str, Adapter], config: DiagnoseConfig, clock: Now) -> None:
        self.adapters = adapters
        self.config = config
        self.clock = clock

    def diagnose(
        self,
        incident: Incident,
        offered: Sequence[Action] = (),
        live: Sequence[Incident] = (),
    ) -> Diagnosis:
        """Diagnose ``incident`` as its work is now; recommend only the ``offered`` buttons.

        ``live``: the live incidents of the same work, so a settled incident's diagnosis
        names the one open for its work now.
        """
        evidence = gather(self.adapters, incident, self.clock(), offered, live)
        config = self.config
        if config.base_url and config.model:
            from watchkeeper.decide.llm import ModelFailed, ask_model

            try:
                return Diagnosis(redact(ask_model(config, evidence)), f"model:{config.model}")
            except ModelFailed as exc:
                log.warning(
                    "Diagnosis model failed, answering by rules: %s",
                    exc,
                    extra={"action": "diagnose"},
                )
                return Diagnosis(rule_based(evidence), f"rules (the model failed: {exc})")
        return Diagnosis(rule_based(evidence), "rules")
