"""A leader that dies or pauses hands over cleanly: the next one takes the lease at a higher
epoch, the paused one writes nothing once it resumes, and every stall still gets one card.

A send cut off by a killed replica is taken over by the live ones as "may have been
sent"; a send a live replica has in flight is never touched by another, even one
that is starting up.
"""

from __future__ import annotations

import json
import time

from ...support.replicas import CHECK_INTERVAL_S, Cluster, Lease, chat_for
from ...support.waiting import wait_for

#: Generous against a loaded machine; the product promises two check intervals.
TAKEOVER_TIMEOUT_S = 10 * CHECK_INTERVAL_S + 10


def _card_in(cluster: Cluster, number: int) -> None:
    chat = str(chat_for(number))
    wait_for(lambda: cluster.cards()[chat] >= 1, what=f"a card in chat {chat}", timeout=30)


def test_a_paused_leader_writes_nothing_after_it_resumes(cluster: Cluster) -> None:
    replicas = cluster.start(3)
    cluster.stall("before", chat_for(0))
    _card_in(cluster, 0)
    old, lease = cluster.leader()
    old_name = cluster.name_of(old)
    assert old_name is not None
    cluster.wait_sweeps(old_name, 1)

    old.sigstop()

    def taken_over() -> Lease | None:
        now = cluster.lease()
        moved = now is not None and now.holder not in (None, old_name) and now.epoch > lease.epoch
        return now if moved else None

    new_lease = wait_for(taken_over, what="another replica taking the lease", timeout=30)
    assert new_lease is not None and new_lease.holder is not None
    swept = cluster.last_sweep_at(old_name)
    others = [r for r in replicas if r is not old]
    cluster.stall("during", chat_for(1), via=others[0])
    _card_in(cluster, 1)

    old.sigcont()
    cluster.wait_ticks(old_name, 2)  # it runs again and has looked at the lease twice
    cluster.wait_sweeps(new_lease.holder, 2)
    cluster.stall("after", chat_for(2), via=old)  # a follower still takes reports
    _card_in(cluster, 2)
    cluster.wait_sweeps(new_lease.holder, 2)

    assert old.running
    assert cluster.last_sweep_at(old_name) == swept, "the resumed replica recorded a sweep"
    final = cluster.lease()
    assert final is not None and final.holder == new_lease.holder, "the resumed replica leads"
    assert final.epoch == new_lease.epoch
    assert cluster.opened_events() == {"before": 1, "during": 1, "after": 1}
    assert cluster.card_deliveries() == {"before": 1, "during": 1, "after": 1}
    assert cluster.sends() == {str(chat_for(n)): 1 for n in range(3)}, cluster.logs()


def test_a_killed_leader_is_replaced_and_the_next_stall_gets_its_card(cluster: Cluster) -> None:
    cluster.start(3)
    old, lease = cluster.leader()
    old.sigkill()
    new, taken = cluster.leader(timeout=TAKEOVER_TIMEOUT_S)
    assert new is not old
    assert taken.epoch == lease.epoch + 1
    cluster.stall("after-kill", chat_for(0))
    _card_in(cluster, 0)
    name = cluster.name_of(new)
    assert name is not None
    cluster.wait_sweeps(name, 2)
    assert cluster.sends() == {str(chat_for(0)): 1}
    assert cluster.opened_events() == {"after-kill": 1}


def test_a_send_cut_off_by_a_kill_is_taken_over_as_maybe_sent(cluster: Cluster) -> None:
    cluster.start(3)
    cluster.telegram.hang_next("sendMessage")
    cluster.stall("cut", chat_for(0))
    wait_for(cluster.telegram.hanging.is_set, what="the card's send held by Telegram")
    ((delivery, claimer),) = cluster.rows(
        "SELECT id, claimed_by FROM deliveries WHERE status = 'sending'"
    )
    # The claim names the replica; its process id is the second part of the name.
    sender = next(r for r in cluster.alive() if str(claimer).split(":")[1] == str(r.pid))
    sender.sigkill()
    cluster.telegram.release()

    def status() -> str:
        return str(cluster.scalar("SELECT status FROM deliveries WHERE id = :i", i=delivery))

    wait_for(
        lambda: status() == "maybe_sent",
        what="the killed replica's send marked maybe_sent by a live replica",
        timeout=TAKEOVER_TIMEOUT_S,
    )
    leader, _ = cluster.leader(timeout=TAKEOVER_TIMEOUT_S)
    name = cluster.name_of(leader)
    assert name is not None
    cluster.wait_sweeps(name, 2)
    assert status() == "maybe_sent"
    assert cluster.sends() == {str(chat_for(0)): 1}, "a send that may have arrived went again"


def test_a_restarting_replica_leaves_a_live_replicas_sends_alone(cluster: Cluster) -> None:
    started = cluster.start(3)
    # The send belongs to a replica that neither leads nor restarts: a leader that has not
    # claimed yet takes rows under its own name for a dead predecessor's, and this live
    # owner never claimed the row written for it below.
    first_leader, _ = cluster.leader()
    owner, restarting = [r for r in started if r is not first_leader]
    owner_name = cluster.name_of(owner)
    assert owner_name is not None
    now = time.time()
    target = json.dumps({"platform": "telegram", "chat_id": str(chat_for(0))})
    # A send the owner has in flight: claimed by it, its claim still running.
    cluster.execute(
        "INSERT INTO deliveries (dedup_key, purpose, channel, target, payload, status, attempts,"
        " next_attempt_at, created_at, updated_at, claimed_by, claim_until) VALUES"
        " ('in-flight', 'note', 'telegram', CAST(:target AS JSON), CAST(:payload AS JSON),"
        " 'sending', 1, :now, :now, :now, :owner, :until)",
        target=target,
        payload=json.dumps({"text": "in flight"}),
        now=now,
        owner=owner_name,
        until=now + 3600,
    )
    restarting.stop()
    cluster.restart(restarting)
    restarted = cluster.name_of(restarting)
    assert restarted is not None
    cluster.wait_ticks(restarted, 2)
    leader, _ = cluster.leader()
    leader_name = cluster.name_of(leader)
    assert leader_name is not None
    cluster.wait_sweeps(leader_name, 2)
    held = "SELECT status, claimed_by FROM deliveries WHERE dedup_key = 'in-flight'"
    assert [tuple(row) for row in cluster.rows(held)] == [("sending", owner_name)]
