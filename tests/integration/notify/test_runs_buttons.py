"""``/runs`` on Slack and Discord: each item that needs attention carries its incident's buttons.

The answers go through the local fakes, which check them against each platform's
own models (``slack_sdk`` blocks, ``discord_typings``); presses on them are built
as each platform builds a press on an ephemeral message, signed as it signs them,
and decided as a press on a card is. A self-reporting kind's incident has no
card: ``/runs`` is where it is pressed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import discord_typings
import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.offer import label
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ...support.live_server import LiveServer, live_server
from ..decide.fixtures import acting_runtime
from ..fakes import discord, slack
from ..fakes.platform import ActionService, FakePlatform, action_service
from ..fakes.typeddicts import problems
from ..helpers import reports_for, start, sweep
from .chat import USERS, now_s, table, user

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": discord.fake_discord,
    "slack": slack.fake_slack,
}
PUBLIC = "https://wk.example"


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    with FAKES[request.param]() as started:
        yield started
        assert started.invalid == [], "our side sent something the platform would refuse"


@pytest.fixture
def actions() -> Iterator[ActionService]:
    with action_service() as started:
        yield started


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakePlatform
) -> Iterator[Runtime]:
    admins = {name: [ids["ana"], ids["cleo"]] for name, ids in USERS.items()}
    runtime = acting_runtime(
        tmp_path,
        store,
        clock,
        actions.url,
        admins=admins,
        forge={"public_url": PUBLIC},
        **{fake.NAME: table(fake)},
    )
    yield runtime
    runtime.sweeper.close()


@pytest.fixture
def server(acting: Runtime) -> Iterator[LiveServer]:
    with live_server(acting) as running:
        yield running


# -- each platform's answer and presses on it ---------------------------------------------


def checked_runs(fake: FakePlatform, server: LiveServer, clock: ManualClock) -> dict[str, Any]:
    """Ask ``/runs`` as bob; the answer, checked against the platform's own models."""
    answer: dict[str, Any] = fake.runs(server.url, user(fake, "bob"), "bob", False, now_s(clock))
    if fake.NAME == "slack":
        fake.invalid += slack.block_problems(answer.get("blocks", []))
        assert len(answer["blocks"]) <= 50
    else:
        fake.invalid += problems(answer, discord_typings.InteractionResponseData)
        rows = answer["data"].get("components", [])
        discord._check_components(rows, fake.invalid, "$.data.components")
        assert len(answer["data"]["content"]) <= 2000
    return answer


def labels(fake: FakePlatform, answer: dict[str, Any]) -> list[str]:
    if fake.NAME == "slack":
        return [
            e["text"]["text"]
            for b in answer["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
        ]
    return [c["label"] for row in answer["data"].get("components", []) for c in row["components"]]


def text_of(fake: FakePlatform, answer: dict[str, Any]) -> str:
    if fake.NAME == "slack":
        return "\n".join(b["text"]["text"] for b in answer["blocks"] if b["type"] == "section")
    return str(answer["data"]["content"])


def press(
    fake: FakePlatform,
    server: LiveServer,
    answer: dict[str, Any],
    button: str,
    name: str,
    clock: ManualClock,
) -> dict[str, Any]:
    """Press ``button`` of the ephemeral ``/runs`` answer as ``name``; what was sent."""
    if fake.NAME == "slack":
        return _press_slack(fake, server, answer, button, name, clock)
    return _press_discord(fake, server, answer, button, name, clock)


def _press_slack(
    fake: Any,
    server: LiveServer,
    answer: dict[str, Any],
    button: str,
    name: str,
    clock: ManualClock,
) -> dict[str, Any]:
    block, element = next(
        (b, e)
        for b in answer["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["text"]["text"] == button
    )
    user_id = user(fake, name)
    # Slack's payload for a press on an ephemeral message: its container says so, and it
    # carries no copy of the message (ephemeral messages cannot be read back).
    payload = {
        "type": "block_actions",
        "user": {"id": user_id, "username": name, "name": name, "team_id": slack.TEAM_ID},
        "api_app_id": "A0APP",
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": slack.next_ts(),
            "channel_id": fake.CHAT,
            "is_ephemeral": True,
        },
        "trigger_id": "9.1.abc",
        "team": {"id": slack.TEAM_ID, "domain": "ops"},
        "channel": {"id": fake.CHAT, "name": "alerts"},
        "state": {"values": {}},
        "response_url": fake.response_url(),
        "actions": [
            {
                "action_id": element["action_id"],
                "block_id": block.get("block_id", "b1"),
                "text": element["text"],
                "value": element["value"],
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    sent = slack.post_form(
        server.url, "/webhooks/slack", {"payload": json.dumps(payload)}, now_s(clock)
    )
    assert sent.status_code == 200, sent.text
    return payload


def _press_discord(
    fake: Any,
    server: LiveServer,
    answer: dict[str, Any],
    button: str,
    name: str,
    clock: ManualClock,
) -> dict[str, Any]:
    data = answer["data"]
    custom_id = next(
        c["custom_id"]
        for row in data["components"]
        for c in row["components"]
        if c["label"] == button
    )
    shown = discord.Stored(
        discord.snowflake(), fake.CHAT, data["content"], data["components"], None, time.monotonic()
    ).as_dict()
    shown["flags"] = data["flags"]  # the ephemeral answer, as Discord hands it back
    interaction = discord.component_interaction(custom_id, user(fake, name), name, fake.CHAT, shown)
    sent = discord.post_interaction(server.url, fake.signer, interaction, now_s(clock))
    assert sent.json() == {"type": 6}, sent.text
    return interaction


def told(fake: FakePlatform, sent: dict[str, Any]) -> str:
    """The one private answer to the press ``sent``, once it came."""
    fake.wait_for(lambda: bool(fake.replies_to(sent)))
    (reply,) = fake.replies_to(sent)
    assert reply.items() >= fake.PRIVATE.items()
    return str(reply[fake.TEXT])


# -- the scenarios ------------------------------------------------------------------------


def test_runs_shows_each_incidents_buttons_labelled_with_its_id(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakePlatform
) -> None:
    start(acting, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    (incident,) = acting.store.incidents.list("open")
    answer = checked_runs(fake, server, clock)
    offered = acting.decider.offered(incident)
    assert labels(fake, answer) == [f"#{incident.id} {label(a)}" for a in offered]
    assert f"swarm_task t1) stalled — incident {incident.id}" in text_of(fake, answer)


def test_a_self_reporting_kinds_incident_is_decided_from_runs(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakePlatform
) -> None:
    start(acting, "p1", "x_post")
    reports_for(acting).fail("x_post", "p1", "the post was refused", None, None)
    sweep(acting)
    (incident,) = acting.store.incidents.list("open")
    assert acting.store.outbox.for_incident(incident.id) == []  # no card: its notice told
    answer = checked_runs(fake, server, clock)
    dismiss, diagnose = f"#{incident.id} Dismiss", f"#{incident.id} Ask to diagnose"
    assert labels(fake, answer) == [dismiss, diagnose]

    refused = told(fake, press(fake, server, answer, dismiss, "bob", clock))
    assert "admin" in refused, refused
    assert acting.store.incidents.get(incident.id).decision is None

    diagnosis = told(fake, press(fake, server, answer, diagnose, "bob", clock))
    assert diagnosis.startswith(f"Incident {incident.id}: ") and "x_post p1" in diagnosis

    won = told(fake, press(fake, server, answer, dismiss, "ana", clock))
    assert (
        won == f"Incident {incident.id}: dismissed: this failure of this work will not be "
        "reported again"
    )
    decided = acting.store.incidents.get(incident.id).decision
    assert decided is not None and decided.action == "dismiss"


def test_a_stale_press_from_runs_does_nothing(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakePlatform
) -> None:
    start(acting, "t2", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    (incident,) = acting.store.incidents.list("open")
    answer = checked_runs(fake, server, clock)
    reports_for(acting).progress("swarm_task", "t2", "it moved", None)
    text = told(fake, press(fake, server, answer, f"#{incident.id} Dismiss", "ana", clock))
    assert "moved on" in text, text
    assert acting.store.incidents.get(incident.id).decision is None


def test_items_past_the_platforms_limits_are_named_with_a_link(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakePlatform
) -> None:
    # Slack holds 50 blocks (a section and an actions block per item); Discord 5 rows.
    count, fits = (26, range(20, 25)) if fake.NAME == "slack" else (8, range(5, 6))
    for n in range(count):
        start(acting, f"t{n:02d}", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    incidents = sorted(i.id for i in acting.store.incidents.list("open"))
    assert len(incidents) == count
    answer = checked_runs(fake, server, clock)
    pressable = {int(text.split()[0][1:]) for text in labels(fake, answer)}
    assert len(pressable) in fits, sorted(pressable)
    text = text_of(fake, answer)
    for incident_id in incidents:
        if incident_id in pressable:
            assert f"incident {incident_id}, buttons below" in text
        else:
            assert f"incident {incident_id}: {PUBLIC}/web/incidents/{incident_id}" in text
