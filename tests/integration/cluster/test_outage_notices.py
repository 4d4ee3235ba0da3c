"""Three replicas, one database outage: operators hear "not working" once and "working again" once.

The replicas reach PostgreSQL through a proxy of this test's own, so the
outage is theirs alone: the shared server stays up for every other test.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ...conftest import PG_ADMIN_URL
from ...support.replicas import Replica, fresh_schema
from ...support.tcp_proxy import tcp_proxy
from ...support.waiting import wait_for
from ..recorder import Recorder, recording_server

REPLICAS = 3
DOWN_AFTER_S = 2
#: A failed lease tick is logged every half check interval; this many span the announce delay.
TICKS_SPANNING_DOWN_AFTER = 6
TICK_FAILED = "Leader lease tick failed"

pytestmark = pytest.mark.slow


def _notices(hook: Recorder) -> Counter[str]:
    with hook.lock:
        return Counter(request.json()["type"] for request in hook.requests)


def _config(database_url: str, hook_url: str) -> str:
    return (
        'data_dir = "data"\n'
        "check_interval_s = 1\n"
        f"down_after_s = {DOWN_AFTER_S}\n"
        f'database_url = "{database_url}"\n'
        "[ops]\n"
        f'webhook_url = "{hook_url}/ops"\n'
        'webhook_secret = "s3cret"\n'
        'channels = ["webhook"]\n'
    )


def _failed_ticks(replica: Replica, since: int) -> int:
    return replica.log.read_bytes()[since:].decode(errors="replace").count(TICK_FAILED)


def test_one_outage_makes_one_down_and_one_up_notice(tmp_path: Path, pg_schema_url: str) -> None:
    host, port = "127.0.0.1", 5432
    with (
        fresh_schema(PG_ADMIN_URL) as url,
        tcp_proxy((host, port)) as proxy,
        recording_server() as hook,
    ):
        proxied = url.replace(f"{host}:{port}", f"{host}:{proxy.port}", 1)
        direct = create_engine(url)
        replicas = [
            Replica(i, tmp_path / f"replica{i}", _config(proxied, hook.url))
            for i in range(REPLICAS)
        ]
        try:
            for replica in replicas:
                replica.start()
            for replica in replicas:
                replica.wait_healthy()

            def members() -> dict[str, float]:
                with direct.connect() as conn:
                    rows = conn.execute(text("SELECT replica, beat_at FROM cluster_members"))
                    return {row.replica: row.beat_at for row in rows}

            wait_for(lambda: len(members()) == REPLICAS, what="every replica's heartbeat")

            proxy.cut()
            marks = [replica.log.stat().st_size for replica in replicas]
            wait_for(
                lambda: _notices(hook)["supervision_down"] >= 1,
                what="the first 'not working' notice",
                timeout=60,
            )
            # Every replica lived through more of the outage than the announce delay: any that
            # would tell operators on its own has had the time to.
            wait_for(
                lambda: all(
                    _failed_ticks(r, mark) >= TICKS_SPANNING_DOWN_AFTER
                    for r, mark in zip(replicas, marks, strict=True)
                ),
                what="every replica to have failed its lease ticks through the delay",
                timeout=60,
            )
            proxy.restore()
            wait_for(
                lambda: _notices(hook)["supervision_up"] >= 1,
                what="the 'working again' notice",
                timeout=60,
            )
            # Each replica beats a few more times once the database answers again.
            after = members()
            wait_for(
                lambda: all(
                    beat > after[name] + 2 for name, beat in members().items() if name in after
                ),
                what="every replica to beat again after the outage",
                timeout=60,
            )
            assert _notices(hook) == Counter({"supervision_down": 1, "supervision_up": 1})
        finally:
            for replica in replicas:
                replica.stop()
            direct.dispose()
