"""A program's notices go to its group's ``notify``; an edge drawn on the canvas sends the
next ones elsewhere.

End to end: a real ``watchkeeper serve`` runs a program whose group routes to a Slack
channel while the ops channels are a Telegram chat. Its crash loop's card arrives in the
Slack fake, and none in Telegram; the canvas's post then routes the program to the ops
channels (the server's tree). Restarted, the program runs until the sweep has seen it (the
incident resolves), then loops again: that next episode's card arrives in the Telegram
fake, none more in Slack.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import patient_http

from ...support.serving import serving
from ...support.waiting import wait_for
from ...support.web_login import logged_in
from ..fakes.slack import FakeSlack, fake_slack
from ..fakes.telegram import FakeTelegram, fake_telegram

pytestmark = pytest.mark.slow(seconds=40)
OPS_CHAT = -1001234567890
PROGRAMS_CHANNEL = "C0PROGRAMS"
# Runs while the file argv[1] exists and exits 1 once it is gone (at once without it): a
# crash loop whenever the test takes the file away.
FLAKY = """import os, sys, time
while os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.exit(1)
"""


@pytest.fixture
def telegram() -> Iterator[FakeTelegram]:
    with fake_telegram() as fake:
        yield fake


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack() as fake:
        yield fake


def _config(tmp_path: Path, telegram: FakeTelegram, slack: FakeSlack) -> Path:
    program = tmp_path / "flaky.py"
    program.write_text(FLAKY)
    file = tmp_path / "watchkeeper.toml"
    file.write_text(
        f"""data_dir = "{tmp_path / "data"}"
check_interval_s = 1

[ops]
channels = ["telegram:{OPS_CHAT}"]

[telegram]
bot_token = "{telegram.token}"
base_url = "{telegram.url}"

[slack]
bot_token = "{slack.token}"
base_url = "{slack.url}"

[programs.crawler]
command = ["{sys.executable}", "{program}", "{tmp_path / "up"}"]
start_s = 0
group = "crawl"

[groups.crawl]
intensity = {{ restarts = 2, within_s = 60 }}
backoff = {{ initial_s = 0, jitter = 0 }}
notify = "slack:{PROGRAMS_CHANNEL}"
"""
    )
    return file


@contextmanager
def _session(url: str, token: str) -> Iterator[tuple[httpx.Client, str]]:
    """A browser logged in to the dashboard, and its CSRF token."""
    with logged_in(url, token) as (web, csrf):
        yield web, csrf


def _crawler(url: str, token: str) -> dict[str, Any]:
    bearer = {"Authorization": f"Bearer {token}"}
    answer = patient_http.get(f"{url}/api/v1/programs/crawler", headers=bearer, timeout=10)
    answer.raise_for_status()
    found: dict[str, Any] = answer.json()
    return found


def _incident(url: str, token: str) -> dict[str, Any]:
    bearer = {"Authorization": f"Bearer {token}"}
    answer = patient_http.get(f"{url}/api/v1/incidents", headers=bearer, timeout=10)
    answer.raise_for_status()
    found: dict[str, Any] = next(
        i for i in answer.json()["incidents"] if i["run_id"].startswith("crawler@")
    )
    return found


def _cards(texts: list[str]) -> list[str]:
    return [text for text in texts if "crash loop" in text and "crawler" in text]


def test_the_crash_loop_card_goes_to_the_groups_chat_and_after_an_edge_to_ops(
    tmp_path: Path, telegram: FakeTelegram, slack: FakeSlack
) -> None:
    file = _config(tmp_path, telegram, slack)
    written = file.read_text()
    with serving(file) as (_process, url, token):
        first = wait_for(
            lambda: _cards([m.shown for m in slack.in_channel(PROGRAMS_CHANNEL)]),
            what="the crash loop's card in the group's Slack channel",
        )
        assert _cards([m.text for m in telegram.messages(OPS_CHAT)]) == []
        assert _crawler(url, token)["notify"] == {
            "to": f"slack:{PROGRAMS_CHANNEL}",
            "set_by": "group",
        }
        with _session(url, token) as (web, csrf):
            answer = web.post(
                "/web/canvas/programs/crawler/notify",
                json={"to": "server"},
                headers={"x-csrf-token": csrf, "accept": "application/json"},
            )
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"] == (
            f"crawler's notices go to the ops channels (telegram:{OPS_CHAT}) now: saved to the "
            "running configuration; watchkeeper.toml still says what it said, so a restart of "
            "the server goes back to it"
        )
        assert _crawler(url, token)["notify"] == {"to": "ops", "set_by": "program"}
        # Started again and up until the sweep has seen it run (the incident resolves), then
        # looping again: the same incident's next episode, whose card goes where it says now.
        (tmp_path / "up").touch()
        bearer = {"Authorization": f"Bearer {token}"}
        restarted = patient_http.post(
            f"{url}/api/v1/programs/crawler/restart", headers=bearer, timeout=30
        )
        assert restarted.status_code == 200, restarted.text
        wait_for(
            lambda: _incident(url, token)["status"] == "resolved",
            what="the first crash loop's incident resolved by the restart",
        )
        (tmp_path / "up").unlink()
        second = wait_for(
            lambda: _cards([m.text for m in telegram.messages(OPS_CHAT)]),
            what="the next crash loop's card in the ops chat",
        )
        slack_cards = _cards([m.shown for m in slack.in_channel(PROGRAMS_CHANNEL)])
        episode = _incident(url, token)
    assert (episode["status"], episode["episodes"]) == ("open", 2)
    assert "crash loop: more than 2 restarts within 60 s" in first[0]
    assert "crash loop: more than 2 restarts within 60 s" in second[0]
    assert len(slack_cards) == 1, "the second crash loop posted nothing new to Slack"
    assert file.read_text() == written
    assert telegram.invalid == slack.invalid == []
