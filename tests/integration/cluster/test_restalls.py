"""Work that stalls, moves again and stalls again: three replicas tell people exactly what one
replica tells them (a card, a "moving again" note, a card again), never a message per replica."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ...conftest import PG_ADMIN_URL
from ...support.replicas import KIND, Cluster, chat_for, fresh_schema
from ...support.waiting import wait_for
from ..fakes.platform import ActionService
from ..fakes.telegram import fake_telegram

RUNS = 10


def _events(cluster: Cluster, kind: str) -> Counter[str]:
    found = cluster.rows(
        "SELECT i.run_id, count(*) FROM incident_events e JOIN incidents i "
        "ON i.id = e.incident_id WHERE e.type = :kind GROUP BY i.run_id",
        kind=kind,
    )
    return Counter({str(run): int(n) for run, n in found})


def _settled(cluster: Cluster) -> bool:
    """Every event routed and every message it made sent (or settled otherwise)."""
    unrouted = cluster.scalar("SELECT count(*) FROM incident_events WHERE routed_at IS NULL")
    unsent = cluster.scalar(
        "SELECT count(*) FROM deliveries WHERE status IN ('pending', 'sending')"
    )
    return unrouted == 0 and unsent == 0


def _scenario(root: Path, actions: ActionService, replicas: int) -> Counter[str]:
    """Each run stalls, moves, stalls again; returns the messages each chat received."""
    root.mkdir()
    with fake_telegram() as telegram, fresh_schema(PG_ADMIN_URL) as url:
        cluster = Cluster(root, url, telegram, actions.url)
        try:
            started = cluster.start(replicas)
            runs = [f"m{n}" for n in range(RUNS)]
            for n, run in enumerate(runs):
                cluster.stall(run, chat_for(n), via=started[n % replicas])
            wait_for(lambda: len(_events(cluster, "opened")) == RUNS, what="every first stall")
            wait_for(lambda: _settled(cluster), what="the first cards settled")
            for n, run in enumerate(runs):  # moves again, then stalls once more
                moved = cluster.call(
                    "POST",
                    f"/api/v1/runs/{KIND}/{run}/progress",
                    {"step": "two"},
                    via=started[(n + 1) % replicas],
                )
                assert moved.status_code == 200, moved.text
            wait_for(lambda: len(_events(cluster, "reopened")) == RUNS, what="every second stall")
            wait_for(lambda: _settled(cluster), what="every message settled")
            leader, _ = cluster.leader()
            cluster.wait_sweeps(cluster.name_of(leader) or "", 2)  # nothing more on its way
            wait_for(lambda: _settled(cluster), what="whatever those sweeps made settled")
            assert cluster.telegram.invalid == []
            return cluster.sends(cards_only=False)
        finally:
            cluster.close()


@pytest.mark.slow  # two clusters of real servers, one after the other
def test_three_replicas_send_what_one_replica_sends(
    tmp_path: Path, actions: ActionService, pg_schema_url: str
) -> None:
    alone = _scenario(tmp_path / "one", actions, 1)
    together = _scenario(tmp_path / "three", actions, 3)
    assert sum(alone.values()) >= 2 * RUNS  # a card for each stall at least: the test saw work
    assert together == alone
