"""Replicas killed at random while work stalls and people press buttons: every stall gets
exactly one card, and every press is decided and carried out once."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ...support.replicas import Cluster, chat_for
from ...support.waiting import wait_for
from ..fakes.platform import ActionService

KILLS = 20
STALLS_PER_KILL = 2
SEED = 20260105


@pytest.mark.slow(seconds=90)  # twenty kills and restarts of real servers
def test_random_kills_lose_no_card_and_send_none_twice(
    cluster: Cluster, actions: ActionService
) -> None:
    rng = random.Random(SEED)
    cluster.start(3)
    stalls: list[int] = []
    pressed: list[int] = []
    for kill in range(KILLS):
        for _ in range(STALLS_PER_KILL):
            number = len(stalls)
            cluster.stall(f"s{number}", chat_for(number))
            stalls.append(number)
        victim = rng.choice(cluster.alive())
        victim.sigkill()
        carded = [n for n in stalls if n not in pressed and cluster.cards()[str(chat_for(n))] == 1]
        if carded and kill % 2 == 0:
            # Pressed while a replica is down, on whichever replica answers.
            chosen = rng.choice(carded)
            answer = cluster.press(f"s{chosen}", "cancel")
            assert answer.status_code == 200, answer.text
            pressed.append(chosen)
            path = f"/cancel/s{chosen}"
            actions.wait_for(lambda p=path: p in actions.paths)  # type: ignore[misc]
        cluster.restart(victim)

    chats = {str(chat_for(n)) for n in stalls}

    def unsure() -> set[str]:
        # A kill between a card's claim and its call leaves it maybe_sent: never sent twice,
        # and the incident says the card may not have arrived. Told, not lost.
        rows = cluster.rows(
            "SELECT i.run_id FROM deliveries d JOIN incidents i ON i.id = d.incident_id "
            "WHERE d.purpose = 'card' AND d.status = 'maybe_sent'"
        )
        return {str(chat_for(int(str(run)[1:]))) for (run,) in rows}

    wait_for(
        lambda: set(cluster.cards()) | unsure() >= chats,
        what="a card (or an honest maybe_sent) for every stall",
        timeout=60,
    )
    wait_for(
        lambda: (
            cluster.scalar("SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')")
            == 0
        ),
        what="the outbox settled",
        timeout=60,
    )
    leader, _ = cluster.leader()
    name = cluster.name_of(leader)
    assert name is not None
    cluster.wait_sweeps(name, 2)

    sends = cluster.sends()
    twice = [chat for chat, count in sends.items() if count > 1]
    assert twice == [], f"a card went twice: {cluster.sent_to(twice[:3])}"
    assert cluster.notes_sent_twice() == [], "a note went twice"
    cut_off = unsure() - set(cluster.cards())
    assert len(cut_off) <= 2, f"more kills than chance would land mid-call: {cut_off}"
    assert sorted(chats - set(cluster.cards()) - cut_off) == [], "a stall got no card"
    assert cluster.cards() == dict.fromkeys(chats - cut_off, 1), cluster.logs()
    assert cluster.opened_events() == {f"s{n}": 1 for n in stalls}
    assert len(pressed) >= KILLS // 2 - 2  # the presses really happened
    assert Counter(actions.paths) == {f"/cancel/s{n}": 1 for n in pressed}
    decided = cluster.rows(
        "SELECT run_id, decided_action FROM incidents WHERE decided_at IS NOT NULL"
    )
    assert sorted((str(run), str(action)) for run, action in decided) == sorted(
        (f"s{n}", "cancel") for n in pressed
    )
    won = cluster.rows(
        "SELECT i.run_id, count(*) FROM presses p JOIN incidents i ON i.id = p.incident_id "
        "GROUP BY i.run_id"
    )
    assert {str(run): int(count) for run, count in won} == {f"s{n}": 1 for n in pressed}
    assert cluster.telegram.invalid == []
