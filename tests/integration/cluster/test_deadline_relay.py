"""A run reported to a follower is judged at its deadline by the leader, not at the next tick.

Only the leader sweeps. A report that lands on a follower wakes the follower's
own (idle) sweep loop; unless the deadline reaches the leader, a stall waits
for the leader's next scheduled sweep, a whole check interval away. Here the
interval is an hour: the stall is opened only if the deadline was relayed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, text

from tests.support import patient_http
from watchkeeper.store import Store
from watchkeeper.store.tokens import Role

from ...conftest import PG_ADMIN_URL
from ...support.replicas import Replica, fresh_schema
from ...support.waiting import wait_for

#: Far longer than the test may wait: only a relayed deadline makes the leader sweep in time.
CHECK_INTERVAL_S = 3600


def _config(database_url: str) -> str:
    return (
        'data_dir = "data"\n'
        f"check_interval_s = {CHECK_INTERVAL_S}\n"
        f'database_url = "{database_url}"\n'
        "[kinds.relay]\n"
        "budget_s = 1\n"
    )


def test_a_follower_relays_a_new_deadline_to_the_leader(tmp_path: Path, pg_schema_url: str) -> None:
    with fresh_schema(PG_ADMIN_URL) as url:
        store = Store(url, migrate=False)
        try:
            token = store.tokens.create(Role.ADMIN, "relay test", datetime.now(UTC))[1]
        finally:
            store.close()
        engine = create_engine(url)
        leader = Replica(0, tmp_path / "leader", _config(url))
        follower = Replica(1, tmp_path / "follower", _config(url))
        try:
            leader.start()
            leader.wait_healthy()  # its first tick took the free lease
            follower.start()
            follower.wait_healthy()
            with engine.connect() as conn:
                holder = conn.execute(text("SELECT holder FROM cluster_lease")).scalar_one()
            assert holder.split(":")[1] == str(leader.pid)

            headers = {"Authorization": f"Bearer {token}"}
            started = patient_http.post(
                follower.url + "/api/v1/runs",
                json={"kind": "relay", "run_id": "r1", "title": "relay r1", "effects": "none"},
                headers=headers,
                timeout=10,
            )
            assert started.status_code in (200, 201), started.text

            def opened() -> bool:
                with engine.connect() as conn:
                    return bool(
                        conn.execute(
                            text("SELECT count(*) FROM incidents WHERE run_id = 'r1'")
                        ).scalar_one()
                    )

            wait_for(opened, what="the leader to judge the follower's run at its deadline")
        finally:
            for replica in (follower, leader):
                replica.stop()
            engine.dispose()
