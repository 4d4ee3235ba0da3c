"""``watchkeeper serve`` killed with SIGKILL while cards wait behind their chats' pace loses
none of them.

A real ``serve`` process on each store sends cards to the fake Discord and the
fake Telegram; it is killed again and again, each time with cards claimed and
waiting for their slot, and (in turn on each platform) one request held open at
the platform. Every card reaches its platform; Discord, which recognises a
resend by its nonce, shows each card once although a cut-off call is made
again; Telegram, which cannot, gets no card twice; and only the requests open
at a kill (which did reach Telegram) end ``maybe_sent``.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from watchkeeper.store import Store

from ...support.replicas import Replica
from ...support.waiting import wait_for
from ..fakes.discord import FakeDiscord, fake_discord
from ..fakes.telegram import FakeTelegram, fake_telegram
from .killed_mid_pace import Board, check, serve_config, settled_within

#: Short, so a killed process's heartbeat lapses and its claims are recovered within a second.
CHECK_INTERVAL_S = 0.5
#: Cards queued to each chat at the start, and before each restart.
FIRST_CARDS, MORE_CARDS = 3, 2


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with fake_discord() as started:
        started.per_channel_limit = None  # our pace keeps Discord's; the test counts messages
        yield started


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started


def kill_and_restart(
    store: Store, root: Path, discord: FakeDiscord, telegram: FakeTelegram, kills: int
) -> Board:
    """Run ``serve``, kill it ``kills`` times as described above, then let it send the rest."""
    board = Board(store, discord, telegram)
    serve = Replica(0, root / "serve", serve_config(store.url, discord, telegram, CHECK_INTERVAL_S))
    board.queue(FIRST_CARDS)
    try:
        for kill in range(kills):
            if kill:
                board.queue(MORE_CARDS)
            hold = "discord" if kill % 2 == 0 else "telegram"
            if hold == "discord":
                discord.hold_next()
            else:
                telegram.hang_next("sendMessage")
            serve.start()
            serve.wait_healthy()
            claimer = board.claimer_of(serve)
            wait_for(
                partial(board.kill_when_accountable, serve, claimer, hold=hold),
                what=f"kill {kill + 1}: a card waiting its slot and a request held",
                timeout=60,
            )
            board.release()
        serve.start()
        serve.wait_healthy()
        settled_within(board, timeout=120)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{serve.log_tail()}") from None
    finally:
        serve.stop()
    return board


@pytest.mark.slow(seconds=15)  # two kills and restarts of a real server
def test_a_kill_while_cards_wait_their_pace_loses_none(
    tmp_path: Path, store: Store, discord: FakeDiscord, telegram: FakeTelegram
) -> None:
    board = kill_and_restart(store, tmp_path, discord, telegram, kills=2)
    figures = check(board, cut_on_the_wire=True)
    assert figures["kills"] == 2
    assert figures["arrived"] == figures["cards"] and figures["duplicates"] == 0


# Twenty kills and restarts of a real server: about 5 s of CPU each; 285-420 s on a machine
# at load 11-14.
@pytest.mark.slow(seconds=120)
def test_twenty_kills_lose_no_card(
    tmp_path: Path, store: Store, discord: FakeDiscord, telegram: FakeTelegram
) -> None:
    board = kill_and_restart(store, tmp_path, discord, telegram, kills=20)
    figures = check(board, cut_on_the_wire=True)
    assert figures["discord_resends_recognised"] >= 1  # a cut-off Discord call was made again
