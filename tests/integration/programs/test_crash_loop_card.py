"""A crash loop past its group's intensity opens an incident whose card, in the ops chat,
offers Restart and Stop; Restart pressed in the chat starts the program again.

End to end: a real ``watchkeeper serve`` runs the program from its configuration, the card
goes to the Telegram fake (which speaks Telegram's wire format), and the press comes back
through the server's webhook as Telegram posts it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import patient_http

from ...support.serving import serving
from ...support.waiting import wait_for
from ..fakes.telegram import WEBHOOK_SECRET, FakeTelegram, fake_telegram, press

pytestmark = pytest.mark.slow(seconds=30)
CHAT = -1001234567890
ADMIN = 42
# Exits 1 at once until the file argv[1] exists, then stays up.
FLAKY = (
    "import os, sys, time\nif not os.path.exists(sys.argv[1]):\n    sys.exit(1)\ntime.sleep(300)\n"
)


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram() as fake:
        yield fake


def config(tmp_path: Path, telegram: FakeTelegram) -> Path:
    program = tmp_path / "flaky.py"
    program.write_text(FLAKY)
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f"""data_dir = "{tmp_path / "data"}"
check_interval_s = 1

[ops]
channels = ["telegram:{CHAT}"]

[telegram]
bot_token = "{telegram.token}"
base_url = "{telegram.url}"
webhook_secret = "{WEBHOOK_SECRET}"

[admins]
telegram = ["{ADMIN}"]

[programs.crawler]
command = ["{sys.executable}", "{program}", "{tmp_path / "fixed"}"]
start_s = 0
group = "crawl"

[groups.crawl]
intensity = {{ restarts = 2, within_s = 60 }}
backoff = {{ initial_s = 0, jitter = 0 }}
"""
    )
    return file


def crawler(url: str, token: str) -> dict[str, object]:
    answer = patient_http.get(
        f"{url}/api/v1/programs/crawler", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    answer.raise_for_status()
    found: dict[str, object] = answer.json()
    return found


def test_a_crash_loop_opens_a_card_with_restart_and_stop_and_restart_brings_it_back(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    with serving(config(tmp_path, telegram)) as (_process, url, token):
        cards = wait_for(
            lambda: [m for m in telegram.messages(CHAT) if "crawler" in m.text],
            what="the crash loop's card in the ops chat",
        )
        assert crawler(url, token)["state"] == "gave_up"
        card = cards[0]
        labels = {b["text"]: b["callback_data"] for row in card.buttons for b in row}
        (tmp_path / "fixed").touch()
        update = telegram.callback_update(card, labels["Restart"], ADMIN, "ana")
        assert press(url, update).status_code == 200
        wait_for(lambda: crawler(url, token)["state"] == "running", what="crawler running again")
        decided = wait_for(
            lambda: [m.text for m in telegram.messages(CHAT) if "Decided: Restart" in m.text],
            what="the card saying who restarted it",
        )
    assert "crash loop: more than 2 restarts within 60 s" in card.text
    assert {"Restart", "Stop"} <= set(labels)
    assert "Decided: Restart by @ana on Telegram" in decided[0]
    assert telegram.invalid == []
