"""``/runs`` in chat: the runs list as a few lines of text, and the buttons of what needs
attention.

Each item that needs attention and has an open incident names that incident
(``incident 12``) and carries the incident's buttons, labelled with its id, in
the same button format as its card, so a press is decided exactly as a press on
the card. A self-reporting kind's incident has no card at all: ``/runs`` is
where it is pressed. Each platform shows as many items' buttons as its limits
allow (:attr:`RunsAnswer.pressable`, in the order they are listed); every other
one is named with a link to its incident on the dashboard.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from watchkeeper.contract import Action
from watchkeeper.decide.offer import label
from watchkeeper.errors import StoreError
from watchkeeper.notify.message import Button, button_data
from watchkeeper.store.incidents import Incident
from watchkeeper.watch.lifecycle import Judged
from watchkeeper.watch.overview import Overview

MAX_LINES = 30
#: A ``/runs`` answer's buttons name their incident (``#12 Cancel``); a card's never do.
_RUNS_LABEL = re.compile(r"#[0-9]+ ")


@dataclass(frozen=True, slots=True)
class Pressable:
    """One item that needs attention: its open incident and the buttons it offers now."""

    incident_id: int
    #: The item as it is listed (``• title (kind run) stalled``).
    line: str
    buttons: tuple[Button, ...]


def _line(item: Judged, suffix: str = "") -> str:
    verdict = item.verdict.condition.value if item.verdict else item.run.status.value
    step = f" · {item.run.step[:60]}" if item.run.step else ""
    return f"• {item.run.title} ({item.run.kind} {item.run.run_id}) {verdict}{step}{suffix}"


def _seen(overview: Overview, item: Judged) -> str:
    seen = overview.last_seen.get((item.run.kind, item.run.run_id))
    return "" if seen is None else f" — {seen.text}"


def _section(
    overview: Overview,
    title: str,
    items: tuple[Judged, ...],
    suffix: str = "",
    named: Callable[[Judged], str] | None = None,
) -> list[str]:
    lines = [f"{title} ({len(items)})"]
    for item in items[:MAX_LINES]:
        extra = suffix + _seen(overview, item) + (named(item) if named else "")
        lines.append(_line(item, extra))
    if len(items) > MAX_LINES:
        lines.append(f"… and {len(items) - MAX_LINES} more")
    return lines


def _incident_of(overview: Overview, item: Judged) -> Incident | None:
    incident = overview.incidents.get((item.run.kind, item.run.run_id))
    if incident is None or incident.decision is not None:
        return None
    return incident


def render(
    overview: Overview,
    include_finished: bool,
    named: Callable[[Incident], str] | None = None,
) -> str:
    """Needs attention, runs, and (with ``all``) finished work, dealt-with incidents labelled.

    ``named`` words the end of an item that needs attention, given its open incident.
    """
    lines: list[str] = []

    def attention_end(item: Judged) -> str:
        incident = _incident_of(overview, item)
        return "" if incident is None or named is None else named(incident)

    for read in overview.unreadable:
        lines.append(f"Unreadable: {read.kind}: {read.error}")
    lines.extend(_section(overview, "Needs attention", overview.attention, named=attention_end))
    lines.extend(_section(overview, "Running", overview.running))
    if include_finished:
        lines.extend(_section(overview, "Dealt with", overview.dealt_with, " — dealt with"))
        lines.extend(_section(overview, "Finished in the last day", overview.finished))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class RunsAnswer:
    """The answer to ``/runs``: the runs list, and the items whose buttons can be shown.

    ``plain`` is the whole answer when the runs could not be read (the store is away).
    """

    overview: Overview | None
    include_finished: bool
    pressable: tuple[Pressable, ...] = ()
    #: Where incident N is on the dashboard (a full URL when the public URL is known).
    link: Callable[[int], str] = lambda incident_id: f"/web/incidents/{incident_id}"
    plain: str = ""

    def text(self, shown: int = 0) -> str:
        """The runs list when the first ``shown`` pressable items carry their buttons: each
        item that needs attention names its incident, with a link when its buttons are not
        shown."""
        if self.overview is None:
            return self.plain
        with_buttons = {p.incident_id for p in self.pressable[:shown]}

        def named(incident: Incident) -> str:
            if incident.id in with_buttons:
                return f" — incident {incident.id}, buttons below"
            return f" — incident {incident.id}: {self.link(incident.id)}"

        return render(self.overview, self.include_finished, named)


def runs_label(incident_id: int, action: Action) -> str:
    """The words on a ``/runs`` answer's button: the action, after its incident's id."""
    return f"#{incident_id} {label(action)}"


def from_runs(labels: Sequence[str]) -> bool:
    """Whether buttons with these words belong to a ``/runs`` answer, not to a card."""
    return any(_RUNS_LABEL.match(text) for text in labels)


def pressable(
    overview: Overview, offered: Callable[[Incident], Sequence[Action]]
) -> tuple[Pressable, ...]:
    """The items that need attention and have an open, undecided incident, with the buttons
    ``offered`` says it has now, labelled with the incident's id (``#12 Cancel``)."""
    found: list[Pressable] = []
    for item in overview.attention[:MAX_LINES]:
        incident = _incident_of(overview, item)
        if incident is None:
            continue
        buttons = tuple(
            Button(
                runs_label(incident.id, action),
                action.value,
                button_data(incident.id, action.value, incident.state_token),
            )
            for action in offered(incident)
        )
        if buttons:
            found.append(Pressable(incident.id, _line(item), buttons))
    return tuple(found)


async def runs_answer(
    read: Callable[[bool], Awaitable[Overview]],
    argument: str,
    *,
    offered: Callable[[Incident], Sequence[Action]] | None = None,
    link: Callable[[int], str] | None = None,
    down: Callable[[StoreError], str] | None = None,
    last_known: Callable[[], Overview | None] | None = None,
) -> RunsAnswer:
    """The answer to ``/runs`` (or ``/runs all``); ``read(include_finished)`` reads the runs,
    ``offered`` says which buttons an incident offers now (read off the event loop).

    When watchkeeper's own store cannot be reached, ``down`` words the first
    line and ``last_known`` gives what the last good check saw, if anything;
    nothing can be pressed then.
    """
    include = argument.strip().lower() == "all"
    try:
        overview = await read(include)
        found = () if offered is None else await asyncio.to_thread(pressable, overview, offered)
    except StoreError as exc:
        if down is None:
            raise
        return RunsAnswer(None, include, plain=_while_down(down(exc), last_known))
    if link is None:
        return RunsAnswer(overview, include, found)
    return RunsAnswer(overview, include, found, link)


def _while_down(text: str, last_known: Callable[[], Overview | None] | None) -> str:
    known = None if last_known is None else last_known()
    if known is None:
        return text
    # Only what needed attention: a sweep's read leaves out running work it can show is fine.
    lines = [text, f"As of the last good check at {known.generated_at:%Y-%m-%d %H:%M} UTC:"]
    lines += _section(known, "Needs attention", known.attention)
    return "\n".join(lines)


async def runs_text(
    read: Callable[[bool], Awaitable[Overview]],
    argument: str,
    *,
    down: Callable[[StoreError], str] | None = None,
    last_known: Callable[[], Overview | None] | None = None,
) -> str:
    """The answer to ``/runs`` as text alone, for a place that shows no buttons."""
    answer = await runs_answer(read, argument, down=down, last_known=last_known)
    return answer.text()
