"""Which buttons an incident offers: those that fit its condition and its kind's capabilities."""

from __future__ import annotations

from collections.abc import Iterable

from watchkeeper.contract import Action, Condition, Effects

LABELS: dict[Action, str] = {
    Action.CANCEL: "Cancel",
    Action.RETRY: "Retry",
    Action.RETRY_CHECKED: "Retry (I checked its effects)",
    Action.CLOSE_TURN: "Close the turn",
    Action.DISMISS: "Dismiss",
    Action.DIAGNOSE: "Ask to diagnose",
    Action.RESTART: "Restart",
    Action.STOP: "Stop",
}
#: Actions that decide an incident; "Ask to diagnose" keeps the buttons.
DECIDING = frozenset(LABELS) - {Action.DIAGNOSE}
#: Actions that run the kind's own function, and so go through the action journal.
JOURNALLED = frozenset(
    {
        Action.CANCEL,
        Action.RETRY,
        Action.RETRY_CHECKED,
        Action.CLOSE_TURN,
        Action.RESTART,
        Action.STOP,
    }
)
#: Conditions a Cancel makes sense for: the work still holds resources.
_CANCELLABLE = frozenset({Condition.STALLED, Condition.STUCK, Condition.LOOPING})


def buttons(
    condition: Condition,
    effects: Effects,
    capabilities: Iterable[Action],
    *,
    decided: bool,
    resolved: bool,
) -> list[Action]:
    """The buttons to show, in the order people read them."""
    if decided or resolved:
        return [Action.DIAGNOSE]
    able = frozenset(capabilities)
    offered: list[Action] = []
    if condition in _CANCELLABLE and Action.CANCEL in able:
        offered.append(Action.CANCEL)
    if Action.RETRY in able and condition is not Condition.SLOW:
        # With effects outside our reach unknown, the only retry is one whose presser checked.
        offered.append(Action.RETRY if effects is Effects.NONE else Action.RETRY_CHECKED)
    if condition is Condition.STUCK and Action.CLOSE_TURN in able:
        offered.append(Action.CLOSE_TURN)
    # A supervised program that failed for good (a crash loop): start it again, or leave it.
    if condition is Condition.FAILED:
        offered += [a for a in (Action.RESTART, Action.STOP) if a in able]
    offered += [Action.DISMISS, Action.DIAGNOSE]
    return offered


def label(action: Action | str) -> str:
    """The words on the button."""
    return LABELS[Action(action)]
