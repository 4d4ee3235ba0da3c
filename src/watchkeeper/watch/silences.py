"""Silences and acknowledgement, as Alertmanager and PagerDuty users expect them.

A silence matches work by kind, run id, title pattern and origin (every
matcher given must match), starts now and ends after a duration. Incidents it
matches are still opened, recorded and listed, but nothing is sent about them
while it lasts; its end is announced once. An acknowledgement ("I am on it")
says who is looking at an incident without deciding anything; it holds for the
incident's current episode until the incident is resolved.

The records are defined beside their tables (:mod:`watchkeeper.store.silences`)
and re-exported here for the layers above the services.
"""

from __future__ import annotations

import builtins
import fnmatch
import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from watchkeeper.clock import Now
from watchkeeper.durations import seconds_of
from watchkeeper.errors import Conflict, InvalidInput
from watchkeeper.store import Store
from watchkeeper.store.incidents import Incident, IncidentStatus
from watchkeeper.store.silences import Ack, Matchers, NewSilence, Silence

__all__ = [
    "Ack",
    "Matchers",
    "Silence",
    "SilenceService",
    "matches",
    "parse_duration",
    "validate_matchers",
]

#: The longest silence: longer ones are better a kind that reports itself, or a dismissal.
MAX_DURATION = timedelta(days=30)
CHAT_PLATFORMS = ("telegram", "discord", "slack")
SYNTAXES = ("glob", "regex")


def parse_duration(value: str | float) -> timedelta:
    """``90`` (seconds), ``"45m"``, ``"1h"``, ``"2h30m"``, ``"1d"`` → a positive duration."""
    hint = 'write it as seconds or with units, such as "30m", "1h" or "2h30m"'
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        read = seconds_of(value)
        if read is None:
            raise InvalidInput(f"duration {value!r} is not a duration: {hint}", "duration")
        seconds = read
    if not seconds > 0:
        raise InvalidInput(
            f"duration must be positive, not {value!r}: a silence starts now and ends after it",
            "duration",
        )
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidInput(
            f"duration {value!r} is longer than {MAX_DURATION.days} days: silence for less, "
            "and dismiss work that should never be reported",
            "duration",
        )
    return timedelta(seconds=seconds)


def validate_matchers(matchers: Matchers) -> Matchers:
    """``matchers`` with empty values dropped, checked; :class:`InvalidInput` says what is wrong."""
    kind = (matchers.kind or "").strip() or None
    run_id = (matchers.run_id or "").strip() or None
    pattern = (matchers.title_pattern or "").strip() or None
    origin = (matchers.origin or "").strip() or None
    if not (kind or run_id or pattern or origin):
        raise InvalidInput(
            "a silence needs at least one matcher (kind, run_id, title or origin): "
            "one without any would silence everything",
            "kind",
        )
    syntax = matchers.title_syntax or "glob"
    if syntax not in SYNTAXES:
        raise InvalidInput(f"title_syntax must be glob or regex, not {syntax!r}", "title_syntax")
    if pattern is not None and syntax == "regex":
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InvalidInput(
                f"title {pattern!r} is not a valid regular expression: {exc}; "
                'fix it, or use title_syntax "glob" for a shell-style pattern',
                "title",
            ) from None
    if origin is not None:
        platform, _, chat = origin.partition(":")
        if platform not in CHAT_PLATFORMS or not chat.split("/")[0]:
            raise InvalidInput(
                f"origin {origin!r} is not a chat: write PLATFORM:CHAT or PLATFORM:CHAT/THREAD "
                f"with PLATFORM one of {', '.join(CHAT_PLATFORMS)} (telegram:-100123/7)",
                "origin",
            )
    return Matchers(kind, run_id, pattern, syntax if pattern else None, origin)


def matches(matchers: Matchers, incident: Incident) -> bool:
    """Whether every matcher given matches ``incident``.

    A ``glob`` title pattern is a shell-style pattern over the whole title
    (``nightly *``), case-sensitive; a ``regex`` one is searched anywhere in it.
    """
    if matchers.kind is not None and incident.key.kind != matchers.kind:
        return False
    if matchers.run_id is not None and incident.key.run_id != matchers.run_id:
        return False
    pattern = matchers.title_pattern
    if pattern is not None:
        if matchers.title_syntax == "regex":
            if re.search(pattern, incident.title) is None:
                return False
        elif not fnmatch.fnmatchcase(incident.title, pattern):
            return False
    if matchers.origin is not None:
        origin = incident.origin or {}
        platform, _, rest = matchers.origin.partition(":")
        chat, _, thread = rest.partition("/")
        if origin.get("platform") != platform or str(origin.get("chat_id", "")) != chat:
            return False
        if thread and str(origin.get("thread_id") or "") != thread:
            return False
    return True


def describe(matchers: Matchers) -> str:
    """``kind crawl, title "nightly *" (glob)``: what a silence covers, in words."""
    parts = []
    if matchers.kind:
        parts.append(f"kind {matchers.kind}")
    if matchers.run_id:
        parts.append(f"run {matchers.run_id}")
    if matchers.title_pattern:
        parts.append(f'title "{matchers.title_pattern}" ({matchers.title_syntax or "glob"})')
    if matchers.origin:
        parts.append(f"origin {matchers.origin}")
    return ", ".join(parts)


def current_ack(incident: Incident, ack: Ack | None) -> Ack | None:
    """``ack`` if it still holds: for the incident's current episode, until it is resolved."""
    if ack is None or ack.episode != incident.episodes:
        return None
    if incident.status is IncidentStatus.RESOLVED:
        return None
    return ack


class SilenceService:
    """Create, list and expire silences; acknowledge incidents."""

    def __init__(self, store: Store, clock: Now) -> None:
        self._silences = store.silences
        self._acks = store.acks
        self._incidents = store.incidents
        self._clock = clock

    def add(
        self, matchers: Matchers, duration: str | float, comment: str, by: str, via: str
    ) -> Silence:
        """Silence the work ``matchers`` match from now for ``duration``, as ``by`` asked."""
        checked = validate_matchers(matchers)
        length = parse_duration(duration)
        now = self._clock()
        new = NewSilence(checked, comment.strip(), by, via, now, now + length)
        return self._silences.create(new, now)

    def list(self, active: bool = False, limit: int = 200) -> builtins.list[Silence]:
        """Silences, newest first; only those in force now with ``active``."""
        return self._silences.list(self._clock() if active else None, limit)

    def get(self, silence_id: int) -> Silence:
        """One silence (``NotFound`` if there is none)."""
        return self._silences.get(silence_id)

    def covered(self, silence_id: int) -> builtins.list[int]:
        """The incidents whose messages the silence held back."""
        return self._silences.covered(silence_id)

    def expire(self, silence_id: int, by: str) -> Silence:
        """End a silence now; :class:`Conflict` if it had already ended."""
        silence = self._silences.get(silence_id)
        if not self._silences.expire(silence_id, by, self._clock()):
            raise Conflict(
                f"silence {silence_id} already ended at {silence.ends_at:%Y-%m-%d %H:%M} UTC; "
                "create a new one to silence the work again"
            )
        return self._silences.get(silence_id)

    def silencing(self, incidents: Sequence[Incident]) -> dict[int, Silence]:
        """The silence in force now over each of ``incidents`` that has one."""
        active = self._silences.list(self._clock(), limit=1000)
        found: dict[int, Silence] = {}
        for incident in incidents:
            for silence in active:
                if matches(silence.matchers, incident):
                    found[incident.id] = silence
                    break
        return found

    def acknowledgements(self, incidents: Sequence[Incident]) -> dict[int, Ack]:
        """Who is looking at each of ``incidents`` that someone is looking at."""
        acks = self._acks.for_incidents([i.id for i in incidents])
        found: dict[int, Ack] = {}
        for incident in incidents:
            ack = current_ack(incident, acks.get(incident.id))
            if ack is not None:
                found[incident.id] = ack
        return found

    def acknowledge(self, incident_id: int, actor: str, via: str) -> Ack:
        """Mark ``actor`` as looking at the incident; decides nothing.

        :class:`Conflict` when it is resolved: there is nothing left to look at.
        """
        incident = self._incidents.get(incident_id, with_events=False)
        if incident.status is IncidentStatus.RESOLVED:
            raise Conflict(
                f"incident {incident_id} is resolved ({incident.resolution}): "
                "there is nothing to be on"
            )
        now = self._clock()
        self._acks.acknowledge(incident.id, incident.episodes, actor, via, now)
        return self._acks.for_incidents([incident.id])[incident.id]


def ends_in(silence: Silence, now: datetime) -> str:
    """``until 15:02 UTC`` or ``ended 14:10 UTC``."""
    verb = "until" if silence.ends_at > now else "ended"
    return f"{verb} {silence.ends_at:%Y-%m-%d %H:%M} UTC"
