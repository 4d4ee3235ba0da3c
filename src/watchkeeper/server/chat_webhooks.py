"""What the chat platforms' webhook routes share.

Each platform's router answers through a chat channel: the notifier's when
the app has one, else one of its own, built on first use and closed with the
app. Each hands a platform request id to :func:`seen_before` (platforms resend
what they think was lost, and a press is decided once). Discord and Slack
acknowledge a press at once and decide it afterwards, in :func:`decided_later`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from fastapi import FastAPI, Request
from starlette.background import BackgroundTask

from watchkeeper.config import Settings
from watchkeeper.decide.decider import Decider
from watchkeeper.notify.channels.base import ChatChannel
from watchkeeper.notify.presses import ChatPress, decide_press, first_time
from watchkeeper.server.deps import services

log = logging.getLogger(__name__)

ChannelT = TypeVar("ChannelT", bound=ChatChannel[Any])


class AnsweringChannel(Generic[ChannelT]):
    """The channel one platform's router answers through; ``lifespan`` closes its own."""

    def __init__(self, kind: type[ChannelT], build: Callable[[Settings], ChannelT]) -> None:
        self.kind = kind
        self.build = build
        #: Where the router keeps a channel it built (``app.state.telegram_channel``, say).
        self.attribute = f"{kind.name}_channel"

    def of(self, request: Request) -> ChannelT:
        """The app's channel for this platform, or the router's own, built once."""
        state = request.app.state
        channels = getattr(state, "channels", None)
        if isinstance(channels, Mapping):
            shared = channels.get(self.kind.name)
            if isinstance(shared, self.kind):
                return shared
        own = getattr(state, self.attribute, None)
        if not isinstance(own, self.kind):
            own = self.build(services(request).settings)
            setattr(state, self.attribute, own)
        return own

    @contextlib.asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        """Close the channel this router built for itself, if it built one."""
        try:
            yield
        finally:
            own = getattr(app.state, self.attribute, None)
            if isinstance(own, self.kind):
                await own.aclose()
                setattr(app.state, self.attribute, None)


async def seen_before(request: Request, platform: str, request_id: str) -> bool:
    """Whether ``platform`` sent ``request_id`` before; logged, since the answer is then a no-op."""
    found = services(request)
    first = await asyncio.to_thread(first_time, found.decider, platform, request_id, found.clock())
    if not first:
        log.info("%s request %s seen before: ignored", platform.capitalize(), request_id,
                 extra={"action": f"{platform}_webhook"})  # fmt: skip
    return not first


def decided_later(
    decider: Decider,
    press: ChatPress,
    tell: Callable[[str], Awaitable[object]] | None,
    missing: str,
) -> BackgroundTask:
    """Decide ``press`` once the platform has its answer; ``tell`` the presser if it did not win.

    ``tell`` is ``None`` when the request carried no way back to the presser;
    ``missing`` says which part, for the log.
    """
    return BackgroundTask(_decide_then_tell, decider, press, tell, missing)


async def _decide_then_tell(
    decider: Decider,
    press: ChatPress,
    tell: Callable[[str], Awaitable[object]] | None,
    missing: str,
) -> None:
    text = await decide_press(decider, press)
    if text is None:
        return
    if tell is None:
        log.warning("Cannot answer a %s press: no %s", press.platform, missing,
                    extra={"action": f"{press.platform}_press"})  # fmt: skip
        return
    await tell(text)
