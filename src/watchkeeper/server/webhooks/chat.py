"""What the chat platforms' webhook routes share.

Each platform's router answers through a chat channel: the notifier's when
the app has one, else one of its own, built on first use and closed with the
app. Each hands a platform request id to :func:`seen_before` (platforms resend
what they think was lost, and a press is decided once). Every platform
acknowledges a press at once and decides it afterwards, in the response's
background task, which the server waits for when it stops cleanly: Discord
and Slack through :func:`decided_later`, Telegram (which answers its callback
query first) in its own route.

Chats are told sentences: what a store or a kind said goes to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

from fastapi import FastAPI, Request
from starlette.background import BackgroundTask

from watchkeeper.config import Settings
from watchkeeper.errors import StoreError
from watchkeeper.notify.channels.base import ChatChannel
from watchkeeper.notify.presses import ChatPress, answer_press, first_time
from watchkeeper.notify.runs_text import RunsAnswer, runs_answer
from watchkeeper.redact import redact
from watchkeeper.server.deps import Services, made_once, services
from watchkeeper.watch.selfcheck import not_working

log = logging.getLogger(__name__)

ChannelT = TypeVar("ChannelT", bound=ChatChannel[Any])
#: Most request ids remembered while the store is away (platforms resend within minutes).
REMEMBERED = 10_000


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


class RecentRequests:
    """Request ids seen while the store could not be asked, kept in this process's memory.

    A platform resends what it thinks was lost; while the store is away this
    is what keeps one press from being answered twice.
    """

    def __init__(self, limit: int = REMEMBERED) -> None:
        self.limit = limit
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, platform: str, request_id: str) -> bool:
        """Whether ``request_id`` is new to this process; remembers it."""
        key = (platform, request_id)
        with self._lock:
            if key in self._seen:
                return False
            self._seen[key] = None
            while len(self._seen) > self.limit:
                self._seen.popitem(last=False)
            return True


async def seen_before(request: Request, platform: str, request_id: str) -> bool:
    """Whether ``platform`` sent ``request_id`` before; logged, since the answer is then a no-op.

    With the store away, this process's memory answers, so the request can
    still be answered (with what can be said while the store is away).
    """
    found = services(request)
    health = found.sweeper.health
    try:
        first = await asyncio.to_thread(
            first_time, found.decider, platform, request_id, found.clock()
        )
    except StoreError as exc:
        health.store_unreachable(found.clock())
        log.warning(
            "Cannot check whether %s sent request %s before, the store is away: %s; "
            "this process's memory answers",
            platform.capitalize(),
            request_id,
            redact(str(exc)),
            extra={"action": f"{platform}_webhook"},
        )
        recent = made_once(request.app, "recent_chat_requests", RecentRequests, RecentRequests)
        first = recent.first_time(platform, request_id)
    else:
        health.store_reached()
    if not first:
        log.info(
            "%s request %s seen before: ignored",
            platform.capitalize(),
            request_id,
            extra={"action": f"{platform}_webhook"},
        )
    return not first


def press_while_down(found: Services) -> Callable[[StoreError], str]:
    """The answer to a press that could not be decided because the store is away.

    One sentence: the store's error names internal hosts and ports, so it goes
    to the log (:func:`~watchkeeper.notify.presses.answer_press` logs it), never
    to the chat.
    """

    def words(exc: StoreError) -> str:
        since = found.sweeper.health.store_unreachable(found.clock())
        return "Nothing was done: " + not_working(since, "press")

    return words


def runs_while_down(found: Services) -> Callable[[StoreError], str]:
    """The first line of ``/runs`` when the store is away; the store's error is logged."""

    def words(exc: StoreError) -> str:
        since = found.sweeper.health.store_unreachable(found.clock())
        log.warning(
            "/runs was answered without the store, which is away: %s",
            redact(str(exc)),
            extra={"action": "chat_runs"},
        )
        text = not_working(since, "ask")
        return text[:1].upper() + text[1:]

    return words


def incident_link(found: Services) -> Callable[[int], str]:
    """Where an incident is on the dashboard: under the server's public URL when one is set."""
    public = (found.settings.forge.public_url or "").rstrip("/")
    return lambda incident_id: f"{public}/web/incidents/{incident_id}"


async def answer_runs(found: Services, argument: str) -> RunsAnswer:
    """``/runs`` from any platform: the runs list with the buttons of what needs attention,
    or, with the store away, what is known."""
    return await runs_answer(
        found.overview,
        argument,
        offered=found.decider.offered,
        link=incident_link(found),
        down=runs_while_down(found),
        last_known=found.sweeper.last_known,
    )


def decided_later(
    found: Services,
    press: ChatPress,
    tell: Callable[[str], Awaitable[object]] | None,
    missing: str,
    *,
    tell_won: bool = False,
) -> BackgroundTask:
    """Decide ``press`` once the platform has its answer; ``tell`` the presser if it did not win
    (with ``tell_won``, whatever came of it: a press on a ``/runs`` answer has no card that
    would say so).

    ``tell`` is ``None`` when the request carried no way back to the presser;
    ``missing`` says which part, for the log.
    """
    return BackgroundTask(_decide_then_tell, found, press, tell, missing, tell_won)


async def _decide_then_tell(
    found: Services,
    press: ChatPress,
    tell: Callable[[str], Awaitable[object]] | None,
    missing: str,
    tell_won: bool,
) -> None:
    answer = await answer_press(found.decider, press, press_while_down(found))
    if answer.won and not tell_won:
        return  # the edited card says so
    text = answer.text
    if tell_won and answer.result is not None:
        text = f"Incident {answer.result.incident_id}: {text}"
    if tell is None:
        log.warning(
            "Cannot answer a %s press: no %s",
            press.platform,
            missing,
            extra={"action": f"{press.platform}_press"},
        )
        return
    await tell(text)
