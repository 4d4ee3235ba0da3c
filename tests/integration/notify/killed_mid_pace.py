"""Cards queued behind their chats' pace, and ``watchkeeper serve`` killed while they wait.

Shared by the kill tests of one server (``test_kills_lose_no_card.py``) and of
a replica set (``tests/integration/cluster/test_leader_kill_cards.py``).

The cards go straight into the outbox, a few per chat, to a few chats on the
fake Discord and the fake Telegram, so at almost any moment every chat has a
card claimed and waiting for its slot. A kill lands at a moment the test can
account for: the process is paused (SIGSTOP) and killed only if every call it
had marked started has reached its platform; otherwise it runs on and is
paused again a moment later. (A kill between the start being committed and
the request's first byte is the one moment a call that never left counts as
"may have arrived": the tests stay out of it, and ``docs/notify.md`` names it.)
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError

from watchkeeper.notify.deliverer import MAX_SAFE_RESENDS
from watchkeeper.notify.message import Message, Target
from watchkeeper.store import Store
from watchkeeper.store.queueing import NewDelivery

from ...support.replicas import Replica
from ...support.waiting import wait_for
from ..fakes.discord import FakeDiscord
from ..fakes.telegram import TOKEN, WEBHOOK_SECRET, FakeTelegram

DISCORD_CHATS = ("1400000000000000101", "1400000000000000102", "1400000000000000103")
#: Private chats: one message a second each, no group allowance.
TELEGRAM_CHATS = ("50001", "50002", "50003")


def serve_config(
    database_url: str, discord: FakeDiscord, telegram: FakeTelegram, check_interval_s: float
) -> str:
    """A ``watchkeeper.toml`` sending to both fakes from the shared database."""
    return (
        f'data_dir = "data"\n'
        f"check_interval_s = {check_interval_s}\n"
        f'database_url = "{database_url}"\n'
        f"[telegram]\n"
        f'bot_token = "{TOKEN}"\n'
        f'base_url = "{telegram.url}"\n'
        f'webhook_secret = "{WEBHOOK_SECRET}"\n'
        f"timeout_s = 5\n"
        f"[discord]\n"
        f'bot_token = "{discord.token}"\n'
        f'public_key = "{discord.signer.public_key}"\n'
        f'base_url = "{discord.url}"\n'
        f"timeout_s = 5\n"
    )


@dataclass(frozen=True)
class Card:
    """One card row and where it goes."""

    id: int
    key: str
    channel: str
    chat: str


@dataclass
class Kills:
    """What the kills found, by delivery id."""

    count: int = 0
    #: Claimed, call not started, not at the platform: lost to ``maybe_sent`` before.
    waiting: set[int] = field(default_factory=set)
    #: Call started (and at the platform) but not settled: open requests, with how many
    #: kills cut each off.
    open: Counter[int] = field(default_factory=Counter)


class Board:
    """The cards, the fakes that show them and the outbox rows that track them."""

    def __init__(self, store: Store, discord: FakeDiscord, telegram: FakeTelegram) -> None:
        self.store = store
        self.discord = discord
        self.telegram = telegram
        self.cards: list[Card] = []
        self.kills = Kills()
        with store.engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("deliveries")}
        # A schema without it records no start: no call is known to have started.
        self._started = "call_started_at IS NOT NULL" if "call_started_at" in columns else "false"

    def queue(self, per_chat: int, chats: int = 3) -> None:
        """``per_chat`` more cards to each of the first ``chats`` chats of both platforms."""
        places = [("discord", c) for c in DISCORD_CHATS[:chats]]
        places += [("telegram", c) for c in TELEGRAM_CHATS[:chats]]
        items: list[NewDelivery] = []
        made: list[tuple[str, str, str]] = []
        for channel, chat in places:
            for _ in range(per_chat):
                key = f"card-{len(self.cards) + len(items)}"
                items.append(
                    NewDelivery(
                        key,
                        None,
                        "card",
                        channel,
                        Target(channel, chat).as_dict(),
                        Message(f"{key} has stalled").as_dict(),
                    )
                )
                made.append((key, channel, chat))
        ids = self.store.outbox.enqueue(items, datetime.now(UTC))
        self.cards += [Card(i, *spec) for i, spec in zip(ids, made, strict=True)]

    # -- what the platforms show -------------------------------------------------------------

    def shown(self) -> Counter[int]:
        """How many messages each card has on its platform (only cards shown at all)."""
        by_key = {card.key: card.id for card in self.cards}
        found: Counter[int] = Counter()
        with self.discord.changed:
            for message in self.discord.messages.values():
                if message.nonce is not None and message.nonce.startswith("wk"):
                    found[int(message.nonce.removeprefix("wk"))] += 1
        with self.telegram.lock:
            for chat in self.telegram.chats.values():
                for item in chat:
                    key = item.text.split(" ", 1)[0]
                    if key in by_key:
                        found[by_key[key]] += 1
        return found

    def discord_resends(self) -> int:
        """Creates Discord answered with a message it already had (the nonce recognised)."""
        with self.discord.changed:
            creates = sum(1 for c in self.discord.calls if c.method == "POST" and c.status == 200)
            return creates - len(self.discord.messages)

    # -- the outbox ----------------------------------------------------------------------------

    def sending(self) -> list[tuple[int, str | None, bool]]:
        """Rows in flight: id, claimer, whether the call was marked started."""
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                text(
                    f"SELECT id, claimed_by, {self._started} FROM deliveries "
                    "WHERE status = 'sending'"
                )
            ).all()
        return [(int(r[0]), r[1], bool(r[2])) for r in rows]

    def statuses(self) -> dict[int, str]:
        """Every row's status."""
        with self.store.engine.connect() as conn:
            return {
                int(i): str(s) for i, s in conn.execute(text("SELECT id, status FROM deliveries"))
            }

    def unsettled(self) -> int:
        """Rows still pending or in flight."""
        return sum(1 for s in self.statuses().values() if s in {"pending", "sending"})

    def claimer_of(self, replica: Replica) -> str:
        """The name ``replica``'s current process claims under, once it has beaten."""

        def beaten() -> str | None:
            with self.store.engine.connect() as conn:
                found = conn.execute(
                    text(
                        "SELECT replica FROM cluster_members WHERE pid = :pid "
                        "ORDER BY started_at DESC"
                    ),
                    {"pid": replica.pid},
                ).scalar()
            return None if found is None else str(found)

        name = wait_for(beaten, what=f"{replica} in cluster_members", timeout=30)
        assert name is not None
        return name

    # -- kills -------------------------------------------------------------------------------

    def kill_when_accountable(
        self,
        replica: Replica,
        claimer: str,
        *,
        hold: str | None = None,
        others: frozenset[str] = frozenset(),
    ) -> bool:
        """Kill ``replica`` (claiming as ``claimer``) if, paused, it has a card claimed and
        waiting, no row of a claimer before it (other than the live ``others``) is left
        unrecovered, the request ``hold`` names (a platform holding one answer) is held, and
        every call it started reached its platform. Otherwise it runs on; False.

        On PostgreSQL a commit the process sent just before it was paused may still be
        under way in the server, and land after the rows were read: the process is killed
        only once none of its rows in flight is locked by a transaction of its own.
        (SQLite's commits are the process's own writes: done, or never.)"""
        if hold == "discord" and not self.discord.holding.is_set():
            return False
        if hold == "telegram" and not self.telegram.hanging.is_set():
            return False
        pid = replica.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: _stopped(pid), what=f"{replica} paused", timeout=10)
        if not self._no_commit_under_way(claimer):
            os.kill(pid, signal.SIGCONT)
            return False
        rows = self.sending()
        shown = self.shown()
        left_over = [row for row, by, _ in rows if by != claimer and by not in others]
        mine = [(row, started) for row, by, started in rows if by == claimer]
        cut_off = {row for row, started in mine if started and not shown[row]}
        waiting = {row for row, started in mine if not started and not shown[row]}
        if left_over or cut_off or not waiting:
            os.kill(pid, signal.SIGCONT)
            return False
        replica.sigkill()
        self.kills.count += 1
        self.kills.waiting |= waiting
        self.kills.open.update(row for row, started in mine if started)
        return True

    def _no_commit_under_way(self, claimer: str) -> bool:
        """Whether no transaction holds a lock on ``claimer``'s rows in flight (a commit the
        paused process sent would): its next commit cannot come while it is paused."""
        if self.store.engine.dialect.name != "postgresql":
            return True
        try:
            with self.store.engine.connect() as conn, conn.begin():
                conn.execute(
                    text(
                        "SELECT id FROM deliveries WHERE status = 'sending' AND claimed_by = :me "
                        "FOR UPDATE NOWAIT"
                    ),
                    {"me": claimer},
                )
        except OperationalError:  # locked: a statement or a commit of its is under way
            return False
        return True

    def release(self) -> None:
        """Answer every held request (the killed process gets nothing)."""
        self.discord.let_go()
        self.telegram.release()


def _stopped(pid: int) -> bool:
    """Whether the process is paused (state ``T``) by now."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def summary(board: Board) -> dict[str, int]:
    """The figures of a run: kills, cards, arrived, duplicates, maybe_sent, resends."""
    shown = board.shown()
    statuses = board.statuses()
    return {
        "kills": board.kills.count,
        "cards": len(board.cards),
        "arrived": sum(1 for card in board.cards if shown[card.id] >= 1),
        "duplicates": sum(max(0, shown[card.id] - 1) for card in board.cards),
        "maybe_sent": sum(1 for s in statuses.values() if s == "maybe_sent"),
        "maybe_sent_discord": sum(
            1 for c in board.cards if c.channel == "discord" and statuses[c.id] == "maybe_sent"
        ),
        "waiting_at_kills": len(board.kills.waiting),
        "open_at_kills": sum(board.kills.open.values()),
        "discord_resends_recognised": board.discord_resends(),
    }


def settled_within(board: Board, timeout: float) -> None:
    """Wait until no row is pending or in flight."""
    wait_for(lambda: board.unsettled() == 0, what="every card settled", timeout=timeout)


def check(board: Board, *, cut_on_the_wire: bool) -> dict[str, int]:
    """Every card arrived, none twice; only requests open at a kill are ``maybe_sent``: to
    Telegram, which cannot recognise a resend, or to Discord once cut off more often than
    a card is resent (a card whose sending keeps killing its process is given up). The kills
    cut cards off waiting for their slot, and (``cut_on_the_wire``) calls on the wire too.
    Returns the figures."""
    figures = summary(board)
    shown = board.shown()
    statuses = board.statuses()
    print(f"\n{figures}")
    lost = [card for card in board.cards if not shown[card.id]]
    how = [
        (c.key, statuses[c.id], c.id in board.kills.waiting, board.kills.open[c.id]) for c in lost
    ]
    assert how == [], f"never reached the platform (status, waiting, cut): {how} ({figures})"
    twice = sorted(card.key for card in board.cards if shown[card.id] > 1)
    assert twice == [], f"shown twice: {twice} ({figures})"
    unsure = {card.id: card for card in board.cards if statuses[card.id] == "maybe_sent"}
    never_open = sorted(set(unsure) - set(board.kills.open))
    assert never_open == [], f"maybe_sent although never called: {never_open} ({figures})"
    given_up = [
        (card.key, board.kills.open[card.id])
        for card in unsure.values()
        if card.channel == "discord" and board.kills.open[card.id] <= MAX_SAFE_RESENDS
    ]
    assert given_up == [], f"a Discord card not resent: {given_up} ({figures})"
    assert {statuses[card.id] for card in board.cards} <= {"sent", "maybe_sent"}
    assert board.kills.waiting, "no kill found a card waiting for its slot"
    assert board.kills.open or not cut_on_the_wire, "no kill cut a call off on the wire"
    return figures
