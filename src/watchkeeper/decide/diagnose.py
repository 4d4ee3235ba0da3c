"""Ask to diagnose: what happened, the likely cause, the safest next step, in a few sentences.

The default diagnoser is rule-based, deterministic and offline. With
``[diagnose] base_url`` and ``model`` set, an OpenAI-compatible endpoint is
asked instead (with read-only tools only), and the rules answer whenever it
fails.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from watchkeeper.clock import Now
from watchkeeper.config import DiagnoseConfig
from watchkeeper.contract import Condition, Effects
from watchkeeper.decide.evidence import Evidence, gather
from watchkeeper.kinds.base import Adapter
from watchkeeper.redact import redact
from watchkeeper.store.incidents import Incident

log = logging.getLogger(__name__)

#: Recognisable causes in failure reasons and log tails, most specific first.
_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)out of memory|oom|killed by signal 9|memoryerror"), "it ran out of memory"),
    (
        re.compile(r"(?i)rate.?limit|429|too many requests|quota"),
        "a rate limit or quota of a service it calls",
    ),
    (re.compile(r"(?i)timed? ?out|timeout|deadline exceeded"), "a call that timed out"),
    (
        re.compile(r"(?i)connection (refused|reset)|unreachable|name or service not known|dns"),
        "a service it needs could not be reached",
    ),
    (
        re.compile(r"(?i)permission denied|forbidden|401|403|unauthori[sz]ed"),
        "missing permissions or expired credentials",
    ),
    (re.compile(r"(?i)no space left|disk full|enospc"), "a full disk"),
)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A few sentences, and where they came from (``rules`` or ``model:NAME``)."""

    text: str
    source: str


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
    """The deterministic diagnosis: three sentences from the evidence."""
    incident, run = evidence.incident, evidence.run
    condition = Condition(incident.key.condition)
    what = (
        f"{incident.title} ({incident.key.kind} {incident.key.run_id}) is {condition.value} "
        f"since {_when(incident.since)}: {incident.reason}."
    )
    if evidence.read_error:
        what += f" Its kind cannot be read right now ({evidence.read_error})."
    detail = evidence.facts.get("detail") or evidence.facts.get("log_tail")
    found = _cause_in(run.failure.reason if run and run.failure else None, detail, incident.reason)
    cause = _likely_cause(condition, evidence, found)
    step = _next_step(condition, evidence)
    text = " ".join([what, cause, step])
    if detail:
        last = [line for line in detail.strip().splitlines() if line.strip()][-2:]
        if last:
            text += " Last output: " + " | ".join(line.strip()[:160] for line in last)
    return redact(text)


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
    run = evidence.run
    effects = run.effects if run is not None else Effects(evidence.incident.effects)
    if condition is Condition.STUCK and evidence.incident.key.kind == "chat_turn":
        return (
            "The safest next step is to close the turn so nobody is left waiting, "
            "then look at why its worker died."
        )
    if condition is Condition.STALLED:
        return (
            "The safest next step is to look at the owner's log: cancel the work if it is "
            "hung, or dismiss this if it is only slow and will recover."
        )
    if effects is Effects.UNKNOWN:
        return (
            "It may already have sent or written something, so check its effects before "
            "retrying (use Retry (I checked its effects))."
        )
    return "It changed nothing outside, so a retry is safe once the cause is fixed."


class Diagnoser:
    """Answers "Ask to diagnose": a model when configured, the rules otherwise or on failure."""

    def __init__(self, adapters: Mapping[str, Adapter], config: DiagnoseConfig, clock: Now) -> None:
        self.adapters = adapters
        self.config = config
        self.clock = clock

    def diagnose(self, incident: Incident) -> Diagnosis:
        """Diagnose ``incident`` from read-only evidence."""
        evidence = gather(self.adapters, incident, self.clock())
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
