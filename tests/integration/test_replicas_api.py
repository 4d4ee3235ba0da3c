"""``/healthz`` says who leads; ``GET /api/v1/replicas`` lists the replicas sharing the database.

The replica under test serves without its loops; the test moves the lease by
ticking its :class:`Leadership` and another one by hand, on a manual clock.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from watchkeeper.clock import ManualClock, rfc3339
from watchkeeper.runtime import Runtime
from watchkeeper.watch.leader import Leadership

from ..support.live_server import LiveServer, live_server


@pytest.fixture
def api(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as server:
        yield server


def _health(api: LiveServer) -> httpx.Response:
    with api.client(None) as anonymous:
        return anonymous.get("/healthz")


def _other(runtime: Runtime, clock: ManualClock) -> Leadership:
    """A second replica on the same database; ``sole`` makes its first tick take the lease."""
    return Leadership(
        runtime.store,
        check_interval_s=runtime.settings.check_interval_s,
        clock=clock,
        sole=True,
        version="9.9.9",
        replica="other-host:4242:abcdef",
    )


def _follow(runtime: Runtime, clock: ManualClock) -> Leadership:
    """The served replica ends up following ``other``, which leads at epoch 2."""
    runtime.leadership.tick()
    other = _other(runtime, clock)
    assert other.tick()
    assert runtime.leadership.tick() is False
    return other


def test_a_follower_is_healthy_while_a_live_leader_sweeps(
    api: LiveServer, runtime: Runtime, clock: ManualClock
) -> None:
    _follow(runtime, clock)
    # A failure from before, when it led, is not this follower's to report: it sweeps nothing.
    runtime.sweeper.health.failed(clock(), "database timed out")
    health = _health(api)
    assert health.status_code == 200, health.text
    body = health.json()
    assert body["status"] == "ok"
    assert body["cluster"] == {
        "replica": runtime.leadership.replica,
        "leader": False,
        "epoch": 2,
        "leader_replica": "other-host:4242:abcdef",
        "leader_alive": True,
        "lease_expires_at": rfc3339(clock() + runtime.leadership.ttl),
    }


def test_no_live_leader_for_longer_than_the_lease_is_unhealthy(
    api: LiveServer, runtime: Runtime, clock: ManualClock
) -> None:
    _follow(runtime, clock)
    ttl = runtime.leadership.ttl
    # The leader stops renewing; the lease lapses, and a failover may take one more lease.
    clock.advance(ttl.total_seconds() + 1)
    lapsed = _health(api)
    assert lapsed.status_code == 200, lapsed.text
    assert lapsed.json()["cluster"]["leader_alive"] is False
    assert lapsed.json()["cluster"]["leader_replica"] is None
    clock.advance(ttl.total_seconds())
    gone = _health(api)
    assert gone.status_code == 503, gone.text
    body = gone.json()
    assert body["status"] == "failing"
    assert body["cluster"]["leader"] is False and body["cluster"]["leader_alive"] is False
    assert "no replica has held the leader lease" in body["error"]
    # This replica takes over: healthy again, and it says it leads.
    assert runtime.leadership.tick()
    back = _health(api)
    assert back.status_code == 200, back.text
    cluster = back.json()["cluster"]
    assert cluster["leader"] is True and cluster["epoch"] == 3
    assert cluster["leader_replica"] == runtime.leadership.replica


def test_the_leader_is_unhealthy_while_its_own_sweeps_fail(
    api: LiveServer, runtime: Runtime, clock: ManualClock
) -> None:
    assert runtime.leadership.tick()
    assert _health(api).status_code == 200
    runtime.sweeper.health.failed(clock(), "database timed out")
    failing = _health(api)
    assert failing.status_code == 503, failing.text
    assert failing.json()["cluster"]["leader"] is True
    assert failing.json()["supervision"]["error"] == "database timed out"


def test_replicas_lists_each_replica_and_who_leads(
    api: LiveServer, runtime: Runtime, clock: ManualClock
) -> None:
    other = _follow(runtime, clock)
    clock.advance(1)
    other.tick()
    with api.client("viewer") as viewer:
        answer = viewer.get("/api/v1/replicas")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["leader"], body["epoch"]) == ("other-host:4242:abcdef", 2)
    assert body["answered_by"] == runtime.leadership.replica
    by_name = {replica["name"]: replica for replica in body["replicas"]}
    assert set(by_name) == {runtime.leadership.replica, "other-host:4242:abcdef"}
    leader = by_name["other-host:4242:abcdef"]
    assert (leader["leader"], leader["alive"], leader["version"]) == (True, True, "9.9.9")
    assert leader["beat_at"] == rfc3339(clock())
    assert leader["beat_age_s"] == 0
    served = by_name[runtime.leadership.replica]
    assert (served["leader"], served["alive"], served["beat_age_s"]) == (False, True, 1)
    assert served["pid"] > 0 and served["host"] and served["started_at"]
    # This replica falls silent: it is listed, but not alive.
    clock.advance(runtime.leadership.ttl.total_seconds())
    other.tick()
    with api.client("viewer") as viewer:
        later = {r["name"]: r for r in viewer.get("/api/v1/replicas").json()["replicas"]}
    assert later[runtime.leadership.replica]["alive"] is False
    assert later["other-host:4242:abcdef"]["alive"] is True


def test_replicas_needs_a_token(api: LiveServer) -> None:
    with api.client(None) as anonymous:
        refused = anonymous.get("/api/v1/replicas")
    assert refused.status_code == 401
    assert "bearer token" in refused.json()["error"]["message"]


def test_before_any_replica_took_the_lease_nobody_leads(api: LiveServer) -> None:
    with api.client("viewer") as viewer:
        body = viewer.get("/api/v1/replicas").json()
    assert (body["leader"], body["epoch"], body["replicas"]) == (None, None, [])
    health = _health(api)
    assert health.status_code == 200  # its lease loop has not run yet: nothing to judge
    assert health.json()["cluster"]["leader_alive"] is False


def test_lease_expiry_is_reported_for_the_leader(
    api: LiveServer, runtime: Runtime, clock: ManualClock
) -> None:
    runtime.leadership.tick()
    clock.advance(1)
    runtime.leadership.tick()
    cluster = _health(api).json()["cluster"]
    assert cluster["lease_expires_at"] == rfc3339(clock() + runtime.leadership.ttl)
    assert cluster["epoch"] == 1
