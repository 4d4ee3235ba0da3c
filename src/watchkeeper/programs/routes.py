"""Where a program's notices go: its own ``notify``, else its group's, else the ops channels.

A program's run carries that place as its origin (:mod:`.records`), so the router
reads it from the store as it reads where any work started, whichever replica
routes; the run is told again whenever the place changes in the running
configuration.
"""

from __future__ import annotations

from typing import Literal

from watchkeeper.config.chat import OPS
from watchkeeper.errors import NotFound
from watchkeeper.programs.plan import GroupPlan, ProgramPlan

#: Who chose a program's place: the program's own ``notify``, its group's, or nobody (ops).
SetBy = Literal["program", "group", "default"]


def notify_of(program: ProgramPlan, group: GroupPlan | None) -> tuple[str, SetBy]:
    """The place ``program``'s notices go (``ops`` or ``PLATFORM:CHAT[/THREAD]``), and who
    chose it."""
    if program.config.notify is not None:
        return program.config.notify, "program"
    if program.grouped and group is not None and group.notify is not None:
        return group.notify, "group"
    return OPS, "default"


def chosen(
    plans: list[GroupPlan], program: ProgramPlan, group: str | None, host: str
) -> tuple[str | None, str]:
    """The ``notify`` that sends ``program``'s notices where group ``group``'s go (``None``:
    the ops channels), and why they go there; :class:`NotFound` for a group there is not."""
    if group is None:
        return OPS, ""
    target = next((g for g in plans if g.name == group and g.declared), None)
    if target is None:
        declared = ", ".join(g.name for g in plans if g.declared) or "none"
        raise NotFound(f"no program group {group!r} on {host}; the groups are: {declared}")
    # Its own group: it follows the group's notify again, whatever that becomes.
    notify = None if program.grouped and program.group == group else target.notify or OPS
    if target.notify is None:
        return notify, f"group {group} has no notify of its own, so it routes to ops"
    return notify, f"group {group}'s place"


def origin_of_place(place: str) -> dict[str, str] | None:
    """The origin a run stores for ``place``: the conversation it names, or ``None`` for
    ``ops`` (work with no chat of its own goes to the ops channels)."""
    if place == OPS:
        return None
    platform, _, rest = place.partition(":")
    chat, _, thread = rest.partition("/")
    origin = {"platform": platform, "chat_id": chat}
    if thread:
        origin["thread_id"] = thread
    return origin


def words(place: str, ops_channels: tuple[str, ...]) -> str:
    """``place`` as a person reads it."""
    if place != OPS:
        return place
    listed = ", ".join(ops_channels) or "none"
    return f"the ops channels ({listed})"


def answer(name: str, place: str, why: str, ops_channels: tuple[str, ...]) -> str:
    """What a route change says: where ``name``'s notices go now, ``why``, and that only the
    running configuration changed."""
    because = f" ({why})" if why else ""
    return (
        f"{name}'s notices go to {words(place, ops_channels)} now{because}: saved to the "
        "running configuration; watchkeeper.toml still says what it said, so a restart of the "
        "server goes back to it"
    )
