"""Who pressed, from where, and whether they may act."""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.config import AdminsConfig

VIA_LABELS = {
    "api": "the API",
    "cli": "the command line",
    "dashboard": "the dashboard",
    "slack": "Slack",
    "telegram": "Telegram",
    "discord": "Discord",
    "runbook": "a runbook",
}
RUNBOOK_ACTOR = "watchkeeper (runbook)"


@dataclass(frozen=True, slots=True)
class Actor:
    """A presser: a display name, the channel, and what the channel knows of their rights.

    ``is_admin`` is decided by the channel: the API role ``admin``, or the
    platform user id listed under ``[admins]`` for chat presses.
    """

    name: str
    via: str
    is_admin: bool
    user_id: str | None = None

    @classmethod
    def from_chat(cls, platform: str, user_id: str, name: str, admins: AdminsConfig) -> Actor:
        """A chat user; admin when their platform id is configured as one."""
        return cls(name, platform, admins.allows(platform, user_id), user_id)

    @classmethod
    def runbook(cls) -> Actor:
        """Automatic first steps act in their own name."""
        return cls(RUNBOOK_ACTOR, "runbook", True)


def via_label(via: str) -> str:
    """Where a press came from, in words."""
    return VIA_LABELS.get(via, via)
