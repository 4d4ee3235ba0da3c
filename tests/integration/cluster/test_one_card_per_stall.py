"""Three replicas watching the same work tell people once: one card per stall, not one per
replica."""

from __future__ import annotations

from ...support.replicas import Cluster, chat_for
from ...support.waiting import wait_for

STALLS = 20


def test_three_replicas_send_one_card_per_stall(cluster: Cluster) -> None:
    replicas = cluster.start(3)
    for number in range(STALLS):
        # Reports arrive at every replica, as a load balancer spreads them.
        cluster.stall(f"r{number}", chat_for(number), via=replicas[number % 3])
    chats = {str(chat_for(number)) for number in range(STALLS)}
    wait_for(lambda: set(cluster.cards()) >= chats, what="a card in every chat", timeout=60)
    leader, _ = cluster.leader()
    # Nothing more is on its way: every card is settled and the leader swept twice since.
    cluster.wait_sweeps(cluster.name_of(leader) or "", 2)
    assert cluster.scalar("SELECT count(*) FROM deliveries WHERE status <> 'sent'") == 0
    assert cluster.sends() == dict.fromkeys(chats, 1), cluster.logs()
    assert cluster.cards() == dict.fromkeys(chats, 1)
    assert cluster.opened_events() == {f"r{n}": 1 for n in range(STALLS)}
    assert cluster.card_deliveries() == {f"r{n}": 1 for n in range(STALLS)}
    assert cluster.telegram.invalid == []
