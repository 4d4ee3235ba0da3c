"""A newcomer with a running Celery app gets a stalled card by adding one table.

End to end: a real Celery worker (subprocess) on a Redis of the test's own, the server
started with the README's first command (``make serve``, the file named by
``WATCHKEEPER_CONFIG``) whose configuration is the ops chat at the Telegram fake plus the
table from the engines page, and nothing installed in the Celery app. The hung task's card
arrives in the chat, and ``watchkeeper runs --json`` lists the task with its verdict.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from ...support.cli import wk
from ...support.live_server import free_port
from ...support.redis_server import RedisServer
from ...support.serving import serving
from ...support.waiting import wait_for
from ...support.workers import worker
from ..fakes.telegram import FakeTelegram, fake_telegram

pytestmark = pytest.mark.slow(seconds=40)
CHAT = -1001234567890
DB = 6


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram() as fake:
        yield fake


def test_a_running_celery_app_gets_a_stalled_card_from_one_table(
    redis: RedisServer, telegram: FakeTelegram, tmp_path: Path
) -> None:
    url = redis.url(DB)
    config_file = tmp_path / "watchkeeper.toml"
    config_file.write_text(
        f"""data_dir = "{tmp_path / "data"}"
check_interval_s = 1

[server]
port = {free_port()}

[ops]
channels = ["telegram:{CHAT}"]

[telegram]
bot_token = "{telegram.token}"
base_url = "{telegram.url}"

[kinds.agent_jobs]
engine = "celery"
url = "{url}"
budget_s = 2
"""
    )
    client = Celery("newcomer", broker=url, backend=url)
    argv = [
        *("celery", "-A", "celery_app", "worker", "-P", "prefork", "-c", "2"),
        *("-n", "app@wktest", "-Q", "celery", "-l", "warning"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
    ]
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    with worker(argv, {"WK_TEST_BROKER": url}, tmp_path / "worker.log"):
        wait_for(
            lambda: "app@wktest" in (client.control.inspect(timeout=0.5).ping() or {}),
            what="the Celery worker up",
        )
        task_id = str(client.send_task("hang", args=[gate]).id)
        with serving(config_file, as_the_readme_says=True) as (_process, server, token):
            cards = wait_for(
                lambda: [m.text for m in telegram.messages(CHAT) if task_id in m.text],
                what="the stalled card in the ops chat",
            )
            listed = wk("runs", "--json", "--server", server, "--token", token)
        client.control.revoke(task_id, terminate=True)
    assert "stalled" in cards[0].lower()
    assert "hang" in cards[0]
    assert telegram.invalid == []
    assert listed.returncode == 0, listed.stderr
    attention = json.dumps(json.loads(listed.stdout)["attention"])
    assert task_id in attention and '"condition": "stalled"' in attention
    assert '"kind": "agent_jobs"' in attention
    client.close()
