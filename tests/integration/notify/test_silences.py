"""Silences and acknowledgement through the Discord and Slack fakes, the API and the CLI.

A silence keeps everything new about matching work out of the chat while the
incidents are still opened and listed; its end is announced once, even when
the process restarts between queueing the announcement and sending it. A
card's "Silence 1 h" silences its piece of work; "I am on it" marks who is
looking and edits the card, deciding nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from watchkeeper.clock import ManualClock
from watchkeeper.decide.actors import Actor
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store
from watchkeeper.store.incidents import Changes
from watchkeeper.watch.silences import Matchers

from ...support.cli import wk
from ...support.live_server import LiveServer, live_server
from ..fakes.discord import fake_discord
from ..fakes.platform import ActionService, FakePlatform
from ..fakes.slack import fake_slack
from ..helpers import start, sweep
from .chat import chat_runtime, deliver, failed, now_s, user

FAKES: dict[str, Callable[[], AbstractContextManager[FakePlatform]]] = {
    "discord": fake_discord,
    "slack": fake_slack,
}


@pytest.fixture(params=sorted(FAKES))
def fake(request: pytest.FixtureRequest) -> Iterator[FakePlatform]:
    """Each platform's fake in turn."""
    with FAKES[request.param]() as started:
        yield started
        assert started.invalid == [], "our channel sent something the platform would refuse"


def add_silence(server: LiveServer, **body: Any) -> dict[str, Any]:
    with server.client() as client:
        response = client.post("/api/v1/silences", json=body)
    assert response.status_code == 201, response.text
    made: dict[str, Any] = response.json()
    return made


def live_incident(server: LiveServer) -> dict[str, Any]:
    with server.client("viewer") as client:
        (listed,) = client.get("/api/v1/incidents", params={"status": "live"}).json()["incidents"]
    found: dict[str, Any] = listed
    return found


def replies(fake: FakePlatform, payload: dict[str, Any]) -> list[str]:
    """The private answers to one press, once the first has arrived."""
    fake.wait_for(lambda: bool(fake.replies_to(payload)))
    return [str(reply[fake.TEXT]) for reply in fake.replies_to(payload)]


def test_a_silenced_failure_sends_nothing_and_is_listed_as_silenced(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    with live_server(acting) as server:
        made = add_silence(server, kind="swarm_task", duration="1h", comment="reindexing")
        failed(acting, fake)
        assert deliver(acting, clock, fake) == 0
        listed = live_incident(server)
        with server.client("viewer") as client:
            shown = client.get(f"/api/v1/silences/{made['id']}").json()
    assert fake.stored() == []
    assert listed["status"] == "open" and listed["kind"] == "swarm_task"
    assert listed["silenced"] == {"silence_id": made["id"], "until": made["ends_at"]}
    assert shown["incidents"] == [listed["id"]] and shown["state"] == "active"
    # Notes are held back too: a diagnosis of the silenced incident is not posted.
    acting.decider.press(listed["id"], "diagnose", None, Actor("@ana", "api", True))
    assert deliver(acting, clock, fake) == 0
    assert fake.stored() == []


def test_work_the_silence_does_not_match_is_still_messaged(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    acting.silences.add(
        Matchers(kind="swarm_task", title_pattern="nightly *"), "1h", "", "@ana", "api"
    )
    failed(acting, fake)  # titled "swarm_task t9"
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    assert "worker crashed" in card.shown


def test_the_end_of_a_silence_is_announced_once_also_across_a_restart(
    tmp_path: Path, store: Store, clock: ManualClock, actions: ActionService, fake: FakePlatform
) -> None:
    first = chat_runtime(tmp_path, store, clock, actions.url, fake)
    made = first.silences.add(Matchers(kind="swarm_task"), "1h", "reindexing", "@ana", "api")
    failed(first, fake)
    assert deliver(first, clock, fake) == 0
    clock.advance(3601)
    # The announcement is queued, then the process stops before sending it.
    assert first.build_notifier({}).route(clock()) == 1
    first.sweeper.close()
    second = chat_runtime(tmp_path, store, clock, actions.url, fake)
    assert deliver(second, clock, fake) == 1
    second.sweeper.close()
    third = chat_runtime(tmp_path, store, clock, actions.url, fake)
    clock.advance(60)
    assert deliver(third, clock, fake) == 0
    third.sweeper.close()
    (note,) = fake.stored()
    assert f"Silence {made.id} ended" in note.shown and "its time ran out" in note.shown
    assert "kind swarm_task — reindexing; set by @ana" in note.shown
    assert "1 incident(s); 1 still open" in note.shown and "swarm_task t9" in note.shown
    assert note.labels == []


def test_expiring_a_silence_early_is_announced_with_who_ended_it(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    with live_server(acting) as server:
        made = add_silence(server, run_id="t9", duration="2h")
        failed(acting, fake)
        assert deliver(acting, clock, fake) == 0
        with server.client() as client:
            ended = client.delete(f"/api/v1/silences/{made['id']}")
            again = client.delete(f"/api/v1/silences/{made['id']}")
            active = client.get("/api/v1/silences").json()["silences"]
    assert ended.status_code == 200 and ended.json()["state"] == "expired"
    assert ended.json()["expired_by"] == "@test admin"
    assert again.status_code == 409 and "already ended" in again.json()["error"]["message"]
    assert active == []
    assert deliver(acting, clock, fake) == 1
    (note,) = fake.in_channel(fake.CHAT)
    assert "expired early by @test admin" in note.shown and "swarm_task t9" in note.shown


def test_the_card_button_silences_that_piece_of_work(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    failed(acting, fake)
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    assert card.labels[-2:] == ["Silence 1 h", "I am on it"]
    with live_server(acting) as server:
        _, stranger = fake.press(
            server.url, card, "Silence 1 h", user(fake, "bob"), "bob", now_s(clock)
        )
        assert replies(fake, stranger) == [f"only admins act: @bob is not an admin on {fake.TITLE}"]
        assert acting.silences.list(active=True) == []
        _, pressed = fake.press(
            server.url, card, "Silence 1 h", user(fake, "ana"), "ana", now_s(clock)
        )
        (said,) = replies(fake, pressed)
    assert said.startswith("silenced swarm_task t9 for 1 h (silence ")
    (made,) = acting.silences.list(active=True)
    assert (made.kind, made.run_id, made.created_by, made.created_via) == (
        "swarm_task",
        "t9",
        "@ana",
        fake.NAME,
    )
    assert (made.ends_at - made.starts_at).total_seconds() == 3600
    presses = acting.store.decisions.presses_for(card_incident(acting))
    assert [(p.actor, p.action, p.outcome) for p in presses] == [
        ("@bob", "silence_1h", "refused"),
        ("@ana", "silence_1h", "silenced"),
    ]
    assert acting.store.incidents.get(card_incident(acting)).decision is None


def card_incident(runtime: Runtime) -> int:
    (live,) = runtime.store.incidents.list("live")
    return live.id


def test_i_am_on_it_shows_who_is_looking_and_decides_nothing(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    failed(acting, fake)
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    labels = list(card.labels)
    with live_server(acting) as server:
        _, pressed = fake.press(
            server.url, card, "I am on it", user(fake, "ana"), "ana", now_s(clock)
        )
        assert replies(fake, pressed) == ["noted: you are on swarm_task t9; nothing was decided"]
        listed = live_incident(server)
    assert listed["acknowledged"]["by"] == "@ana" and listed["acknowledged"]["via"] == fake.NAME
    assert listed["decision"] is None
    clock.advance(5)
    assert deliver(acting, clock, fake) == 1
    assert card.edits == 1
    assert f"On it: @ana ({fake.TITLE}) since 12:00 UTC" in card.shown
    assert card.labels == labels  # nothing was decided: every button is still there


def test_a_press_on_a_card_whose_work_moved_on_is_stale(
    acting: Runtime, clock: ManualClock, fake: FakePlatform
) -> None:
    failed(acting, fake)
    assert deliver(acting, clock, fake) == 1
    (card,) = fake.in_channel(fake.CHAT)
    incident_id = card_incident(acting)
    acting.store.incidents.apply(Changes(token_updates=[(incident_id, "moved")]), clock())
    with live_server(acting) as server:
        _, pressed = fake.press(
            server.url, card, "I am on it", user(fake, "ana"), "ana", now_s(clock)
        )
        assert replies(fake, pressed) == [
            "the work has moved on since this was shown; look again before acting"
        ]
    assert acting.store.acks.for_incidents([incident_id]) == {}


# -- the API and the command line alone --------------------------------------------------------


def stalled_crawl(runtime: Runtime, clock: ManualClock) -> int:
    start(runtime, "c1", "crawl", budget_s=60, lease_s=3600)
    clock.advance(61)
    sweep(runtime)
    (live,) = runtime.store.incidents.list("live")
    return live.id


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"duration": "1h"}, "at least one matcher"),
        ({"kind": "  ", "title": "", "duration": "1h"}, "at least one matcher"),
        ({"kind": "crawl", "duration": -300}, "duration must be positive"),
        ({"kind": "crawl", "duration": "-5m"}, "duration must be positive"),
        ({"kind": "crawl", "duration": 0}, "duration must be positive"),
        ({"kind": "crawl", "duration": "soon"}, "is not a duration"),
        ({"kind": "crawl", "duration": "90d"}, "longer than 30 days"),
        ({"kind": "crawl"}, "duration is required"),
        (
            {"title": "nightly (", "title_syntax": "regex", "duration": "1h"},
            "is not a valid regular expression",
        ),
        ({"title": "x", "title_syntax": "sql", "duration": "1h"}, "title_syntax"),
        ({"origin": "irc:#ops", "duration": "1h"}, "is not a chat"),
        ({"kind": "crawl", "duration": "1h", "colour": "red"}, "unknown field"),
    ],
)
def test_bad_silences_are_refused_with_why(
    runtime: Runtime, body: dict[str, Any], words: str
) -> None:
    with live_server(runtime) as server, server.client() as client:
        response = client.post("/api/v1/silences", json=body)
        listed = client.get("/api/v1/silences", params={"state": "all"}).json()["silences"]
    assert response.status_code == 422, response.text
    assert words in response.json()["error"]["message"]
    assert listed == []


def test_unknown_ids_and_roles_are_refused_with_why(runtime: Runtime, clock: ManualClock) -> None:
    incident_id = stalled_crawl(runtime, clock)
    with live_server(runtime) as server:
        with server.client() as client:
            missing = client.get("/api/v1/silences/999")
            gone = client.delete("/api/v1/silences/999")
            no_incident = client.post("/api/v1/incidents/999/ack")
        with server.client("viewer") as viewer:
            add = viewer.post("/api/v1/silences", json={"kind": "crawl", "duration": "1h"})
            ack = viewer.post(f"/api/v1/incidents/{incident_id}/ack")
    assert (missing.status_code, gone.status_code, no_incident.status_code) == (404, 404, 404)
    assert "no silence 999" in missing.json()["error"]["message"]
    assert "no incident 999" in no_incident.json()["error"]["message"]
    assert (add.status_code, ack.status_code) == (403, 403)
    assert "needs the admin role" in add.json()["error"]["message"]


def test_the_command_line_adds_lists_expires_and_acknowledges(
    runtime: Runtime, clock: ManualClock
) -> None:
    incident_id = stalled_crawl(runtime, clock)
    with live_server(runtime) as server:
        env = {"WATCHKEEPER_URL": server.url, "WATCHKEEPER_TOKEN": server.tokens["admin"]}
        added = wk(
            "silence",
            "add",
            "--kind",
            "crawl",
            "--title",
            "crawl c*",
            "--for",
            "2h",
            "-m",
            "reindexing",
            "--json",
            env=env,
        )
        assert added.returncode == 0, added.stderr
        made = json.loads(added.stdout)
        listed = wk("silence", "list", env=env)
        acked = wk("incidents", "ack", str(incident_id), env=env)
        incidents = wk("incidents", "--json", env=env)
        expired = wk("silence", "expire", str(made["id"]), env=env)
        again = wk("silence", "expire", str(made["id"]), env=env)
        bad = wk("silence", "add", "--title", "(", "--regex", "--for", "1h", env=env)
    assert made["matchers"]["title"] == "crawl c*" and made["matchers"]["title_syntax"] == "glob"
    assert (
        listed.returncode == 0 and "kind=crawl" in listed.stdout and "reindexing" in listed.stdout
    )
    assert acked.returncode == 0 and "@test admin is on it" in acked.stdout, acked.stderr
    (shown,) = json.loads(incidents.stdout)
    assert shown["silenced"]["silence_id"] == made["id"]
    assert shown["acknowledged"]["by"] == "@test admin" and shown["acknowledged"]["via"] == "cli"
    assert expired.returncode == 0 and f"silence {made['id']} expired" in expired.stdout
    assert again.returncode != 0 and "already ended" in again.stderr
    assert bad.returncode != 0 and "not a valid regular expression" in bad.stderr
    assert "Traceback" not in again.stderr + bad.stderr
