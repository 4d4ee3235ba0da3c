"""The leader lease: one holder at a time, failover once it lapses, fenced writes after."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.errors import LeadershipLost
from watchkeeper.store import Store
from watchkeeper.store.fencing import fenced
from watchkeeper.watch.leader import Leadership


def _replica(store: Store, clock: ManualClock, name: str, *, sole: bool = False) -> Leadership:
    return Leadership(
        store, check_interval_s=2.0, clock=clock, sole=sole, version="test", replica=name
    )


def test_one_replica_leads_and_the_others_follow(store: Store, clock: ManualClock) -> None:
    first, second, third = (_replica(store, clock, name) for name in ("a", "b", "c"))
    assert [r.tick() for r in (first, second, third)] == [True, False, False]
    clock.advance(1.0)
    assert [r.tick() for r in (first, second, third)] == [True, False, False]
    lease = store.cluster.lease()
    assert lease is not None and (lease.holder, lease.epoch) == ("a", 1)
    assert store.cluster.live(clock(), first.live_within) == {"a", "b", "c"}


def test_a_silent_leader_is_replaced_within_two_check_intervals(
    store: Store, clock: ManualClock
) -> None:
    leader, follower = _replica(store, clock, "a"), _replica(store, clock, "b")
    leader.tick()
    follower.tick()
    waited = 0.0
    while not follower.tick():  # the leader stops ticking: killed or paused
        clock.advance(follower.tick_every_s)
        waited += follower.tick_every_s
    assert waited <= 2 * 2.0
    assert follower.epoch == 2
    assert store.cluster.live(clock(), follower.live_within) == {"b"}


def test_a_paused_leader_writes_nothing_once_another_took_over(
    store: Store, clock: ManualClock
) -> None:
    leader, follower = _replica(store, clock, "a"), _replica(store, clock, "b")
    leader.tick()
    paused_fence = leader.fence
    assert paused_fence is not None
    clock.advance(5.0)  # past the lease while "a" is stopped
    assert follower.tick()
    with pytest.raises(LeadershipLost), fenced(paused_fence):
        store.cluster.forget_gone(clock() + timedelta(days=2), timedelta(days=1))
    assert len(store.cluster.members()) == 2  # the refused write removed nothing
    # Its next tick sees it lost the lease and follows.
    assert leader.tick() is False
    assert leader.fence is None


def test_a_write_under_the_current_fence_commits(store: Store, clock: ManualClock) -> None:
    leader = _replica(store, clock, "a")
    leader.tick()
    with fenced(leader.fence):
        removed = store.cluster.forget_gone(clock() + timedelta(days=2), timedelta(days=1))
    assert removed == 1  # its own (old by then) heartbeat row: the write went through


def test_a_clean_shutdown_hands_over_at_once(store: Store, clock: ManualClock) -> None:
    leader, follower = _replica(store, clock, "a"), _replica(store, clock, "b")
    leader.tick()
    follower.tick()
    leader.step_down()
    assert follower.tick()  # no waiting out the lease
    assert {m.replica for m in store.cluster.members()} == {"b"}


def test_on_sqlite_the_newest_process_leads_at_once(tmp_path: Path, clock: ManualClock) -> None:
    store = Store(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        crashed = _replica(store, clock, "old", sole=True)
        crashed.tick()
        restarted = _replica(store, clock, "new", sole=True)
        assert restarted.tick()  # the crashed one's lease is not waited out
        assert crashed.tick() is False
        assert restarted.tick()  # and the old one never takes it back while "new" renews
    finally:
        store.close()
