"""The log as a channel: every message is a log record (and kept in memory for the demo)."""

from __future__ import annotations

import itertools
import logging
from collections import deque

from watchkeeper.notify.channels.base import Channel, SendOutcome, SendResult
from watchkeeper.notify.message import Message, Target

log = logging.getLogger("watchkeeper.cards")


class LogChannel(Channel):
    """Writes cards and notes to the log; never fails."""

    name = "log"
    per_chat_rate = 1000.0

    def __init__(self, keep: int = 200) -> None:
        self.recent: deque[tuple[str, Message]] = deque(maxlen=keep)
        self._ids = itertools.count(1)

    async def send(self, target: Target, message: Message, idempotency_key: str) -> SendResult:
        """Log the message with its buttons."""
        message_id = str(next(self._ids))
        self._write("card", message_id, message)
        return SendResult(SendOutcome.SENT, message_id=message_id)

    async def edit(self, target: Target, message: Message) -> SendResult:
        """Log the new form of an earlier message."""
        self._write("update", target.message_id or "?", message)
        return SendResult(SendOutcome.SENT, message_id=target.message_id)

    def _write(self, what: str, message_id: str, message: Message) -> None:
        self.recent.append((message_id, message))
        buttons = " ".join(f"[{b.label}]" for b in message.buttons)
        log.warning(
            "%s %s: %s%s",
            what,
            message_id,
            message.text.replace("\n", " | "),
            f"  {buttons}" if buttons else "",
            extra={"action": "notify_log"},
        )
