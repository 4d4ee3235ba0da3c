"""``notify`` on ``[programs.NAME]`` and ``[groups.NAME]``: ``ops`` or a conversation, checked
as ``[ops] channels`` checks its conversations, refused with what to write instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper import config
from watchkeeper.errors import ConfigError

PROGRAM = '[programs.crawler]\ncommand = ["sleep", "300"]\ngroup = "crawl"\n'


def _load(tmp_path: Path, text: str) -> config.Settings:
    file = tmp_path / "watchkeeper.toml"
    file.write_text(text)
    return config.load(file)


@pytest.mark.parametrize(
    "place", ["ops", "slack:C0123", "telegram:-1001234/7", "discord:123456", "slack:C1/17.1"]
)
def test_a_program_and_a_group_take_ops_or_a_conversation(tmp_path: Path, place: str) -> None:
    text = f'{PROGRAM}notify = "{place}"\n[groups.crawl]\nnotify = "{place}"\n'
    settings = _load(tmp_path, text)
    assert settings.programs["crawler"].notify == place
    assert settings.groups["crawl"].notify == place


def test_without_notify_neither_says_where_and_ops_is_the_default(tmp_path: Path) -> None:
    settings = _load(tmp_path, f"{PROGRAM}[groups.crawl]\n")
    assert settings.programs["crawler"].notify is None
    assert settings.groups["crawl"].notify is None


@pytest.mark.parametrize(
    ("table", "place", "says"),
    [
        ("groups.crawl", "email:ops", "'email:ops' is not a place for notices: write ops"),
        ("groups.crawl", "slack", "'slack' is not a place for notices"),
        ("groups.crawl", "slack:", "write ops (the ops channels), or PLATFORM:CHAT[/THREAD]"),
        ("programs.crawler", "#alerts", "PLATFORM one of telegram, discord, slack"),
        ("programs.crawler", "log", "log is an ops channel: write ops to send notices where"),
        ("programs.crawler", "webhook", "webhook is an ops channel"),
    ],
)
def test_anything_else_is_refused_naming_the_key_and_what_to_write(
    tmp_path: Path, table: str, place: str, says: str
) -> None:
    key = f'notify = "{place}"\n'
    program = key if table == "programs.crawler" else ""
    group = key if table == "groups.crawl" else ""
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, f"{PROGRAM}{program}[groups.crawl]\n{group}")
    message = str(caught.value)
    assert f"{table}.notify = {place!r}" in message
    assert says in message


def test_the_ops_channels_are_checked_the_same_way_as_before(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, '[ops]\nchannels = ["email:x"]\n')
    assert (
        "'email:x' is not a channel: write log, webhook, or PLATFORM:CHAT[/THREAD] with "
        "PLATFORM one of telegram, discord, slack"
    ) in str(caught.value)


def test_a_program_says_first_then_its_group_then_the_ops_channels(tmp_path: Path) -> None:
    from watchkeeper.programs import plan, routes

    text = (
        f'{PROGRAM}notify = "telegram:-1001234/7"\n'
        '[programs.parser]\ncommand = ["sleep", "300"]\ngroup = "crawl"\n'
        '[programs.alone]\ncommand = ["sleep", "300"]\n'
        '[groups.crawl]\nnotify = "slack:C0CRAWL"\n'
    )
    plans = {g.name: g for g in plan.plans(_load(tmp_path, text), "host-1")}
    crawl, alone = plans["crawl"], plans["alone"]
    found = {p.name: routes.notify_of(p, crawl) for p in crawl.programs}
    found["alone"] = routes.notify_of(alone.programs[0], alone)
    assert found == {
        "crawler": ("telegram:-1001234/7", "program"),
        "parser": ("slack:C0CRAWL", "group"),
        "alone": ("ops", "default"),
    }
    # What the program's run holds, read by the router as any run's origin.
    assert routes.origin_of_place("telegram:-1001234/7") == {
        "platform": "telegram",
        "chat_id": "-1001234",
        "thread_id": "7",
    }
    assert routes.origin_of_place("slack:C0CRAWL") == {"platform": "slack", "chat_id": "C0CRAWL"}
    assert routes.origin_of_place("ops") is None
