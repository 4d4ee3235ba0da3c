"""``/runs`` on Telegram: an inline keyboard row per item that needs attention.

Through the local fake of the Bot API, which checks every call against aiogram's
models and Telegram's keyboard rules (callback data of 1 to 64 bytes). A press
on the answer is a callback query like a press on a card, decided the same way;
its outcome is told in a reply under the answer, since no card will say it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.offer import label
from watchkeeper.runtime import Runtime
from watchkeeper.server.webhooks.telegram import WORKING
from watchkeeper.store import Store

from ...support.live_server import LiveServer, live_server
from ..decide.fixtures import acting_runtime
from ..fakes.telegram import TOKEN, WEBHOOK_SECRET, FakeTelegram, Stored, fake_telegram, press
from ..helpers import reports_for, start, sweep
from ..recorder import recording_server

CHAT = -1001234567890
ANA, BOB = 42, 77
PUBLIC = "https://wk.example"


@pytest.fixture
def fake() -> Iterator[FakeTelegram]:
    with fake_telegram() as started:
        yield started
        assert started.invalid == [], "our channel sent something the Bot API would refuse"


@pytest.fixture
def acting(
    tmp_path: Path, store: Store, clock: ManualClock, fake: FakeTelegram
) -> Iterator[Runtime]:
    telegram = {
        "bot_token": TOKEN,
        "webhook_secret": WEBHOOK_SECRET,
        "base_url": fake.url,
        "timeout_s": 5,
    }
    with recording_server() as service:
        runtime = acting_runtime(
            tmp_path,
            store,
            clock,
            service.url,
            admins={"telegram": [str(ANA)]},
            telegram=telegram,
            forge={"public_url": PUBLIC},
        )
        yield runtime
        runtime.sweeper.close()


@pytest.fixture
def server(acting: Runtime) -> Iterator[LiveServer]:
    with live_server(acting) as running:
        yield running


def asked_runs(server: LiveServer, fake: FakeTelegram) -> Stored:
    before = len(fake.messages(CHAT))
    assert press(server.url, fake.command_update(CHAT, "/runs", BOB)).status_code == 200
    answer = fake.messages(CHAT)[before]
    assert answer.text.startswith("Needs attention")
    return answer


def pressed(
    server: LiveServer, fake: FakeTelegram, answer: Stored, button: str, user: int, name: str
) -> str:
    """Press ``button`` on ``answer`` as ``user``; the reply under the answer, once it came."""
    data = next(b["callback_data"] for row in answer.buttons for b in row if b["text"] == button)
    before = len(fake.messages(CHAT))
    update = fake.callback_update(answer, data, user, username=name)
    assert press(server.url, update).status_code == 200
    fake.wait_for(lambda held: len(held.chats.get(CHAT, [])) > before)
    reply = fake.messages(CHAT)[before]
    assert reply.reply_to == answer.message_id
    return reply.text


def test_runs_has_a_keyboard_row_of_each_incidents_buttons(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakeTelegram
) -> None:
    start(acting, "t1", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    (incident,) = acting.store.incidents.list("open")
    answer = asked_runs(server, fake)
    offered = acting.decider.offered(incident)
    assert [[b["text"] for b in row] for row in answer.buttons] == [
        [f"#{incident.id} {label(a)}" for a in offered]
    ]
    assert f"swarm_task t1) stalled — incident {incident.id}, buttons below" in answer.text


def test_a_self_reporting_kinds_incident_is_decided_from_runs(
    acting: Runtime, server: LiveServer, fake: FakeTelegram
) -> None:
    start(acting, "m1", "memory_task")
    reports_for(acting).fail("memory_task", "m1", "the write was refused", None, None)
    sweep(acting)
    (incident,) = acting.store.incidents.list("open")
    assert acting.store.outbox.for_incident(incident.id) == []  # its dead letter told
    answer = asked_runs(server, fake)
    dismiss = f"#{incident.id} Dismiss"
    refused = pressed(server, fake, answer, dismiss, BOB, "bob")
    assert refused.startswith("@bob: ") and "admin" in refused, refused
    won = pressed(server, fake, answer, dismiss, ANA, "ana")
    assert (
        won == f"@ana: incident {incident.id}: dismissed: this failure of this work will "
        "not be reported again"
    )
    assert {a.text for a in fake.answers} == {WORKING}
    decision = acting.store.incidents.get(incident.id).decision
    assert decision is not None and decision.actor == "@ana"


def test_items_past_the_keyboards_limit_are_named_with_a_link(
    acting: Runtime, server: LiveServer, clock: ManualClock, fake: FakeTelegram
) -> None:
    for n in range(12):
        start(acting, f"t{n:02d}", "swarm_task", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(acting)
    answer = asked_runs(server, fake)
    rows = {int(row[0]["text"].split()[0][1:]) for row in answer.buttons}
    assert len(rows) == 10
    for incident in acting.store.incidents.list("open"):
        if incident.id in rows:
            assert f"incident {incident.id}, buttons below" in answer.text
        else:
            assert f"incident {incident.id}: {PUBLIC}/web/incidents/{incident.id}" in answer.text
