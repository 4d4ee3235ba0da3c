"""The leader of three replicas killed while cards wait behind their chats' pace: every card
still arrives, the ones the leader had claimed sent by the replicas left.

Every replica delivers; the leader also recovers a gone replica's claims. Its
own claims, cut off by its death, are recovered by the replica that takes the
lease after it: a card whose call had not started is sent, not written off.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest

from watchkeeper.store import Store

from ...support.replicas import Cluster, Replica
from ...support.waiting import wait_for
from ..fakes.discord import FakeDiscord, fake_discord
from ..fakes.telegram import FakeTelegram
from ..notify.killed_mid_pace import Board, check, serve_config, settled_within

#: Cards queued behind each chat's pace.
CARDS_PER_CHAT = 4


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with fake_discord() as started:
        started.per_channel_limit = None
        yield started


@pytest.mark.slow(seconds=40)  # three real servers on PostgreSQL, one killed
def test_a_leader_killed_while_cards_wait_their_pace_loses_none(
    cluster: Cluster, telegram: FakeTelegram, discord: FakeDiscord
) -> None:
    config = serve_config(cluster.database_url, discord, telegram, check_interval_s=1.0)
    replicas = []
    for index in range(3):
        replica = Replica(index, cluster.root / f"replica{index}", config)
        cluster.replicas.append(replica)
        replica.start()
        replicas.append(replica)
    names = {replica: cluster.wait_member(replica) for replica in replicas}
    leader, _ = cluster.leader()
    store = Store(cluster.database_url, migrate=False)
    try:
        board = Board(store, discord, telegram)
        board.queue(CARDS_PER_CHAT)
        discord.hold_next()
        telegram.hang_next("sendMessage")
        others = frozenset(name for replica, name in names.items() if replica is not leader)
        try:
            wait_for(
                partial(board.kill_when_accountable, leader, names[leader], others=others),
                what="the leader with a card claimed and waiting its slot",
                timeout=60,
            )
            board.release()
            settled_within(board, timeout=90)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{cluster.logs()}") from None
        figures = check(board, cut_on_the_wire=False)
        # The leader was killed with cards waiting, and every one of them arrived once.
        assert figures["kills"] >= 1
        assert figures["arrived"] == figures["cards"] > 0
        assert figures["duplicates"] == 0
    finally:
        store.close()
