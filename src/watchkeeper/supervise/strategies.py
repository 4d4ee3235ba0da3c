"""Restart strategies: which siblings go down and come back with a failed child."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Protocol


class Strategy(enum.StrEnum):
    """How a supervisor reacts when one of its children must be restarted."""

    ONE_FOR_ONE = "one_for_one"
    """Restart only the child that exited."""
    ONE_FOR_ALL = "one_for_all"
    """Stop every other child, then restart them all in start order."""
    REST_FOR_ONE = "rest_for_one"
    """Stop the children started after it, then restart it and them in order."""


def restart_group(strategy: Strategy, count: int, failed: int) -> range:
    """Indices (in start order) of the children restarted when child ``failed`` exits."""
    if not 0 <= failed < count:
        raise IndexError(f"child index {failed} is outside 0..{count - 1}")
    if strategy is Strategy.ONE_FOR_ONE:
        return range(failed, failed + 1)
    if strategy is Strategy.ONE_FOR_ALL:
        return range(count)
    return range(failed, count)


class _Specified(Protocol):
    """A supervisor, as far as switching its strategy goes (no import of its module: it
    imports this one)."""

    spec: Any


def switch(supervisor: _Specified, strategy: Strategy) -> None:
    """Give a supervisor another strategy while it runs: its next restart follows it (the
    supervisor reads its spec's strategy at each restart)."""
    supervisor.spec = dataclasses.replace(supervisor.spec, strategy=strategy)
