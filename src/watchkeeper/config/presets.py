"""Kind presets: the budgets of the kinds of work the project is built for, and what each
already alerts on by itself.

Every preset is also a built-in ``push`` kind of the same name, so work of these
kinds can report without any configuration; a ``[kinds.NAME]`` table names one
with ``preset = "..."`` to start from it, and any key it sets wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchkeeper.contract import Condition

#: The conditions that page, in the order messages and errors name them.
PAGED_CONDITIONS: tuple[str, ...] = tuple(c.value for c in Condition if c.paged)


@dataclass(frozen=True, slots=True)
class Preset:
    """What a kind of work starts from: its progress budget and what it reports itself."""

    #: Seconds without progress before running work is stalled.
    budget_s: float
    #: Conditions the work already alerts on by itself: recorded, never messaged again.
    reports: tuple[str, ...] = ()

    def table(self) -> dict[str, Any]:
        """The preset as the keys of a ``[kinds.NAME]`` table."""
        return {"budget_s": self.budget_s, "reports": list(self.reports)}


PRESETS: dict[str, Preset] = {
    "chat_turn": Preset(600.0),
    "swarm_task": Preset(600.0),
    "document_job": Preset(600.0),
    # The research monitor already reports a research session or a crawl that stalls.
    "research_session": Preset(180.0, ("stalled",)),
    "crawl": Preset(180.0, ("stalled",)),
    # Reading and writing an agent's memory is a few short store calls between steps; a
    # memory task that fails lands in the dead letters, which are their own message.
    "memory_task": Preset(300.0, ("failed",)),
    # Composing and publishing a post; a rate-limit pause should be reported as waiting. A
    # failed post already has its publication notice.
    "x_post": Preset(300.0, ("failed",)),
    # Schedulers alert on a failed job themselves, but none notices a job that hangs.
    "scheduled_job": Preset(900.0, ("failed",)),
    # Stages such as retrieval or a long model call may go minutes between steps.
    "research_pipeline": Preset(900.0),
    # Vacuums, backups and clean-ups checkpoint rarely over large stores.
    "maintenance_sweep": Preset(1800.0),
}


def preset_table(name: object) -> dict[str, Any]:
    """The table keys of preset ``name``, or a :class:`ValueError` naming the choices."""
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        choices = ", ".join(sorted(PRESETS))
        raise ValueError(f"{name!r} is not a preset; choose one of: {choices}")
    return preset.table()


def condition_list(value: object) -> tuple[str, ...]:
    """``reports`` checked: paged conditions only, each once, in their usual order."""
    if not isinstance(value, list | tuple):
        raise ValueError('must be a list of conditions, e.g. reports = ["failed"]')
    for item in value:
        if item == Condition.SLOW.value:
            raise ValueError(
                "slow work is never paged, so there is nothing for it to report: remove slow"
            )
        if item not in PAGED_CONDITIONS:
            *first, last = PAGED_CONDITIONS
            raise ValueError(f"{item!r} is not a condition: use {', '.join(first)} or {last}")
    return tuple(c for c in PAGED_CONDITIONS if c in value)
