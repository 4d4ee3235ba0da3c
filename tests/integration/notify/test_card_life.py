"""A card's life, from its first message to its last edit, on Telegram, Discord and Slack.

One card per piece of work and condition: a move, a re-stall, a failed or
interrupted action and the end of the work are edits of that card and short
notes threaded under it, never a second card. Each scenario runs against each
platform's local fake, which checks every request against the platform's own
wire format (``invalid`` stays empty).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.journal import recover_interrupted
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.channels.telegram import TelegramChannel
from watchkeeper.notify.deliverer import Deliverer
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.decisions import ActionStatus, Claim
from watchkeeper.store.incidents import Incident

from ...support.live_server import LiveServer, live_server
from ...support.waiting import wait_for
from ..decide.fixtures import acting_runtime
from ..fakes import telegram as tg
from ..fakes.discord import fake_discord
from ..fakes.slack import fake_slack
from ..helpers import reports_for, start, sweep
from ..recorder import Recorder, recording_server
from .chat import USERS, channel_for, now_s, table

TELEGRAM_CHAT = -1001234567890
#: Admins on each platform: ana (and cleo); Telegram numbers its users.
ADMINS = {
    **{name: [ids["ana"], ids["cleo"]] for name, ids in USERS.items()},
    "telegram": ["42", "43"],
}
URL = re.compile(r"https?://")


@dataclass(frozen=True)
class Post:
    """One message in the conversation, whatever the platform: what people see of it."""

    id: str
    text: str
    labels: list[str]
    edits: int
    #: The message it is threaded under (a reply, a thread), if any.
    under: str | None


class Chat:
    """One platform's fake, read and pressed through the same verbs."""

    def __init__(self, name: str, fake: Any) -> None:
        self.name = name
        self.fake = fake
        #: The conversation's pace (one post a second): a clock that jumps to each slot, so
        #: posts keep their order and spacing without the test sitting out the seconds.
        self.pace = ManualClock(1000.0, autojump=True)

    @property
    def chat_id(self) -> str:
        return str(TELEGRAM_CHAT) if self.name == "telegram" else str(self.fake.CHAT)

    def settings(self) -> dict[str, Any]:
        if self.name == "telegram":
            return {
                "bot_token": tg.TOKEN,
                "webhook_secret": tg.WEBHOOK_SECRET,
                "base_url": self.fake.url,
                "timeout_s": 5,
            }
        return table(self.fake)

    def channel(self, runtime: Runtime) -> Channel:
        if self.name == "telegram":
            return TelegramChannel(runtime.settings.telegram)
        return channel_for(getattr(runtime.settings, self.name))

    def posts(self) -> list[Post]:
        """The conversation, oldest first."""
        if self.name == "telegram":
            return [
                Post(
                    str(m.message_id),
                    m.text,
                    [b["text"] for row in m.buttons for b in row],
                    m.edits,
                    None if m.reply_to is None else str(m.reply_to),
                )
                for m in self.fake.messages(TELEGRAM_CHAT)
            ]
        if self.name == "discord":
            return [
                Post(m.id, m.content, m.labels, m.edits, m.reference)
                for m in self.fake.in_channel(self.chat_id)
            ]
        return [
            Post(m.ts, m.shown, m.labels, m.edits, m.thread_ts)
            for m in self.fake.in_channel(self.chat_id)
        ]

    def press(self, server: LiveServer, clock: ManualClock, post: Post, label: str) -> None:
        """Ana presses ``label`` on ``post``, as the platform would deliver it."""
        if self.name == "telegram":
            stored = next(
                m for m in self.fake.messages(TELEGRAM_CHAT) if str(m.message_id) == post.id
            )
            data = next(
                b["callback_data"] for row in stored.buttons for b in row if b["text"] == label
            )
            update = self.fake.callback_update(stored, data, 42, "ana")
            answer = tg.press(server.url, update)
        else:
            card = self.fake.message(post.id)
            answer, _ = self.fake.press(
                server.url, card, label, USERS[self.name]["ana"], "ana", now_s(clock)
            )
        assert answer.status_code == 200

    @property
    def invalid(self) -> list[str]:
        return list(self.fake.invalid)


FAKES: dict[str, Callable[[], AbstractContextManager[Any]]] = {
    "telegram": tg.fake_telegram,
    "discord": fake_discord,
    "slack": fake_slack,
}


@pytest.fixture(params=sorted(FAKES))
def chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    with FAKES[request.param]() as fake:
        yield Chat(request.param, fake)


@pytest.fixture
def service() -> Iterator[Recorder]:
    """The kind's own action endpoint."""
    with recording_server() as recorder:
        yield recorder


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, service: Recorder, chat: Chat
) -> Iterator[Runtime]:
    runtime = acting_runtime(
        tmp_path, store, clock, service.url, admins=ADMINS, **{chat.name: chat.settings()}
    )
    yield runtime
    runtime.sweeper.close()


def deliver(runtime: Runtime, clock: ManualClock, chat: Chat) -> int:
    """Route what happened and send what is due through a fresh channel; calls made."""

    async def go() -> int:
        channel = chat.channel(runtime)
        try:
            notifier = runtime.build_notifier({chat.name: channel})
            notifier.deliverer = Deliverer(
                runtime.store,
                notifier.channels,
                clock,
                chat.pace,
                claimer=notifier.deliverer.claimer,
            )
            notifier.route(clock())
            return await notifier.deliver_due()
        finally:
            await channel.aclose()

    return asyncio.run(go())


def origin(chat: Chat) -> dict[str, str]:
    return {"platform": chat.name, "chat_id": chat.chat_id}


def the_incident(runtime: Runtime) -> Incident:
    (found,) = runtime.store.incidents.list()
    return runtime.store.incidents.get(found.id)


def card_and_notes(chat: Chat) -> tuple[Post, list[Post]]:
    """The conversation's one card, and every note, each checked to be threaded under it."""
    card, *notes = chat.posts()
    assert card.under is None
    assert [n.under for n in notes] == [card.id] * len(notes)
    return card, notes


# -- item 1: a card tells how its work ended ---------------------------------------------------


def test_when_the_work_finishes_its_card_says_so_and_offers_nothing_to_press(
    acting: Runtime, clock: ManualClock, chat: Chat
) -> None:
    start(acting, "c1", "crawl", budget_s=60, lease_s=3600, origin=origin(chat))
    clock.advance(61)
    sweep(acting)
    assert deliver(acting, clock, chat) == 1
    (card,) = chat.posts()
    assert "has stalled" in card.text and "Dismiss" in card.labels
    clock.advance(30)
    reports_for(acting).finish("crawl", "c1")
    sweep(acting)
    assert deliver(acting, clock, chat) == 1
    (ended,) = chat.posts()
    assert ended.id == card.id and ended.edits == 1
    assert ended.text.splitlines()[-1] == "Resolved at 12:01 UTC: the work ended: succeeded"
    if chat.name == "slack":
        # Slack keeps the buttons; a press is answered, privately, with what happened.
        assert "Dismiss" in ended.labels
    else:
        assert ended.labels == []
    assert chat.invalid == []


# -- item 2: a re-stall is a note under the first card -----------------------------------------


def test_a_restall_is_a_note_under_the_first_card_whose_buttons_come_back(
    acting: Runtime, clock: ManualClock, chat: Chat
) -> None:
    start(acting, "c1", "crawl", budget_s=60, lease_s=3600, origin=origin(chat))
    clock.advance(61)
    sweep(acting)
    deliver(acting, clock, chat)
    (card,) = chat.posts()
    reports_for(acting).progress("crawl", "c1", "page 2", None)
    sweep(acting)
    deliver(acting, clock, chat)
    moving, notes = card_and_notes(chat)
    assert [n.text for n in notes] == ["crawl c1 is moving again (moved again: page 2)"]
    assert moving.text.splitlines()[-1] == "Moving again since 12:01 UTC: page 2"
    assert moving.labels == (card.labels if chat.name == "slack" else [])
    clock.advance(61)
    sweep(acting)
    deliver(acting, clock, chat)
    again, notes = card_and_notes(chat)
    assert again.id == card.id
    assert len(notes) == 2 and notes[1].text.startswith("crawl c1 has stalled again")
    assert "buttons are back on the card" in notes[1].text
    assert again.labels == card.labels and again.edits == 2
    # The buttons that came back act on the incident as it is now.
    assert "Stalled again at 12:02 UTC" in again.text
    assert chat.invalid == []


def test_a_move_routed_with_its_card_still_edits_it_and_threads_under_it(
    acting: Runtime, clock: ManualClock, chat: Chat
) -> None:
    """The card, the note and the edit are queued in one pass, before the card has an id."""
    start(acting, "c1", "crawl", budget_s=60, lease_s=3600, origin=origin(chat))
    clock.advance(61)
    sweep(acting)
    reports_for(acting).progress("crawl", "c1", "page 2", None)
    sweep(acting)
    assert deliver(acting, clock, chat) == 3
    card, notes = card_and_notes(chat)
    assert [n.text for n in notes] == ["crawl c1 is moving again (moved again: page 2)"]
    assert card.edits == 1 and card.text.splitlines()[-1].startswith("Moving again since")
    assert chat.invalid == []


# -- item 3: a failed or interrupted action says so, and the buttons come back -----------------


def test_a_refused_action_is_told_in_words_and_the_buttons_come_back(
    acting: Runtime, clock: ManualClock, chat: Chat, service: Recorder
) -> None:
    service.status, service.body = 409, b'{"error": "task t9 is already being retried"}'
    start(acting, "t9", "swarm_task", effects="none", origin=origin(chat))
    reports_for(acting).fail("swarm_task", "t9", "worker crashed", None, None)
    sweep(acting)
    deliver(acting, clock, chat)
    (card,) = chat.posts()
    assert "Retry" in card.labels
    with live_server(acting) as server:
        chat.press(server, clock, card, "Retry")
        wait_for(lambda: _journal(acting) == [ActionStatus.FAILED], what="the action to fail")
    clock.advance(5)
    deliver(acting, clock, chat)
    failed, notes = card_and_notes(chat)
    said = failed.text.splitlines()[-1]
    assert said.startswith("Retry failed at 12:00 UTC: the kind refused it (HTTP 409 Conflict)")
    assert "task t9 is already being retried" in said
    (note,) = notes
    assert note.text.startswith("swarm_task t9: Retry failed: the kind refused it")
    assert not URL.search(failed.text) and not URL.search(note.text)
    assert failed.labels == card.labels
    assert the_incident(acting).decision is None
    # The decision was made but the action did not happen: pressing again acts again.
    service.status = 200
    with live_server(acting) as server:
        chat.press(server, clock, failed, "Retry")
        wait_for(
            lambda: _journal(acting) == [ActionStatus.FAILED, ActionStatus.DONE],
            what="the second retry to be done",
        )
    assert [r.path for r in service.requests] == ["/retry/t9", "/retry/t9"]
    assert chat.invalid == []


def test_an_action_interrupted_by_a_restart_says_so_and_offers_the_buttons_again(
    acting: Runtime, clock: ManualClock, chat: Chat
) -> None:
    start(acting, "t9", "swarm_task", effects="none", origin=origin(chat))
    reports_for(acting).fail("swarm_task", "t9", "worker crashed", None, None)
    sweep(acting)
    deliver(acting, clock, chat)
    (card,) = chat.posts()
    assert "Retry" in card.labels
    incident = the_incident(acting)
    # A replica decided Retry and died inside the kind's function: its journal row stays
    # ``started`` until the next start-up finds the replica gone.
    claim = Claim(
        incident.id,
        "retry",
        "@ana",
        chat.name,
        incident.state_token,
        dismiss=False,
        journal=True,
        host="elsewhere",
        pid=os.getpid(),
        replica="gone",
    )
    assert acting.store.decisions.claim(claim, "swarm_task", "t9", clock()).won
    clock.advance(60)
    assert len(recover_interrupted(acting.store, clock(), live=set())) == 1
    deliver(acting, clock, chat)
    interrupted, notes = card_and_notes(chat)
    assert interrupted.text.splitlines()[-1] == (
        "Retry was interrupted by a restart at 12:01 UTC: it may or may not have happened; "
        "check the work before acting again"
    )
    (note,) = notes
    assert "interrupted" in note.text and "buttons are back on the card" in note.text
    # It may have happened: the retry offered now is the one whose presser checked.
    assert "Retry (I checked its effects)" in interrupted.labels
    assert "Retry" not in interrupted.labels and "Dismiss" in interrupted.labels
    assert chat.invalid == []


def _journal(runtime: Runtime) -> list[ActionStatus]:
    (incident,) = runtime.store.incidents.list()
    return [a.status for a in runtime.store.decisions.actions_for_incident(incident.id)]


# -- the worked example: the README's stalled crawl, over its whole life -----------------------


def test_the_readme_crawl_over_its_whole_life_is_one_card_a_note_per_move_and_edits(
    acting: Runtime, clock: ManualClock, chat: Chat
) -> None:
    """``report start crawl "crawl example.org" --budget 5``, ``progress --step "page 1"``;
    it stalls, moves to page 2, stalls again, and finishes."""
    start(acting, "c1", "crawl", budget_s=5, lease_s=3600, origin=origin(chat))
    reports_for(acting).progress("crawl", "c1", "page 1", None)
    life: list[tuple[str, Callable[[], object]]] = [
        ("stall", lambda: clock.advance(6)),
        ("move", lambda: reports_for(acting).progress("crawl", "c1", "page 2", None)),
        ("stall again", lambda: clock.advance(6)),
        ("finish", lambda: reports_for(acting).finish("crawl", "c1")),
    ]
    for _, step in life:
        step()
        sweep(acting)
        deliver(acting, clock, chat)
        clock.advance(1)
    card, notes = card_and_notes(chat)
    moves = 2  # stalled -> moving, moving -> stalled
    assert len(chat.posts()) == 1 + moves
    assert card.edits == 3  # moving, stalled again (buttons back), finished
    assert [n.text.split(" (")[0].split(" since")[0] for n in notes] == [
        "crawl c1 is moving again",
        "crawl c1 has stalled again",
    ]
    assert card.text.splitlines()[-1].endswith("the work ended: succeeded")
    assert chat.invalid == []
