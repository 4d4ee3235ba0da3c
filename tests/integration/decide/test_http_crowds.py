"""Crowds over real HTTP: several cards pressed at once, a card pressed again once decided,
and presses that cannot win in the same crowd as those that can."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from watchkeeper.store.tokens import Role

from ...support.live_server import LiveServer
from ..recorder import Recorder
from .test_surfaces import failed_incident

CARDS = 6
PER_CARD = 16


async def _press_all(url: str, presses: list[tuple[int, dict[str, Any], str]]) -> list[Any]:
    """Every ``(incident id, body, secret)`` press in flight at once; their answers, in order."""
    limits = httpx.Limits(max_connections=len(presses))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    f"/api/v1/incidents/{incident_id}/decide",
                    json=body,
                    headers={"Authorization": f"Bearer {secret}"},
                )
                for incident_id, body, secret in presses
            )
        )
    return [(r.status_code, r.json()) for r in responses]


def _admins(api: LiveServer, count: int) -> list[str]:
    now = api.runtime.clock()
    return [api.runtime.store.tokens.create(Role.ADMIN, f"p{i}", now)[1] for i in range(count)]


def test_several_cards_pressed_at_once_each_has_one_winner_its_losers_name(
    api: LiveServer, service: Recorder
) -> None:
    cards = [failed_incident(api, f"api-{n}") for n in range(CARDS)]
    tokens = {i: api.runtime.store.incidents.get(i).state_token for i in cards}
    secrets = _admins(api, PER_CARD)
    # Interleaved, so the cards' presses arrive mixed together.
    presses = [
        (i, {"action": "dismiss", "state_token": tokens[i]}, secret)
        for secret in secrets
        for i in cards
    ]
    answers = asyncio.run(_press_all(api.url, presses))

    for incident_id in cards:
        mine = [a for (i, _, _), a in zip(presses, answers, strict=True) if i == incident_id]
        won = [body for status, body in mine if status == 200]
        assert len(won) == 1, won
        assert won[0]["outcome"] == "dismissed"
        name = won[0]["decision"]["by"]
        lost = [body["error"] for status, body in mine if status != 200]
        assert len(lost) == PER_CARD - 1
        assert {e["code"] for e in lost} == {"already_decided"}
        assert {e["press"]["incident_id"] for e in lost} == {incident_id}
        assert {e["press"]["decision"]["by"] for e in lost} == {name}
        outcomes = [p.outcome for p in api.runtime.store.decisions.presses_for(incident_id)]
        assert sorted(outcomes) == sorted(["won"] + ["already_decided"] * (PER_CARD - 1))
    assert service.requests == []


def test_a_decided_card_pressed_by_a_crowd_tells_every_press_who_won(
    api: LiveServer, service: Recorder
) -> None:
    incident_id = failed_incident(api)
    token = api.runtime.store.incidents.get(incident_id).state_token
    secrets = _admins(api, 32)
    body = {"action": "dismiss", "state_token": token}
    first = asyncio.run(_press_all(api.url, [(incident_id, body, secrets[0])]))
    assert first[0][0] == 200

    # Presses that could never win, in the same crowd: other buttons, an old token, no token.
    bodies = [
        body,
        {"action": "retry", "state_token": token},
        {"action": "dismiss", "state_token": "old"},
        {"action": "dismiss"},
    ]
    presses = [(incident_id, bodies[n % len(bodies)], s) for n, s in enumerate(secrets)]
    answers = asyncio.run(_press_all(api.url, presses))

    assert {status for status, _ in answers} == {409}
    assert {a["error"]["code"] for _, a in answers} == {"already_decided"}
    assert {a["error"]["press"]["decision"]["by"] for _, a in answers} == {"@p0"}
    for _, answer in answers:
        assert answer["error"]["message"].startswith("already decided: Dismiss by @p0 on the API")
    outcomes = [p.outcome for p in api.runtime.store.decisions.presses_for(incident_id)]
    assert sorted(outcomes) == sorted(["won"] + ["already_decided"] * len(secrets))


def test_a_crowd_with_old_tokens_and_viewers_still_has_one_winner(
    api: LiveServer, service: Recorder
) -> None:
    incident_id = failed_incident(api)
    token = api.runtime.store.incidents.get(incident_id).state_token
    admins = _admins(api, 24)
    now = api.runtime.clock()
    viewers = [api.runtime.store.tokens.create(Role.VIEWER, f"v{i}", now)[1] for i in range(8)]
    # The first presses to arrive carry an old token: they lose as stale, not the card.
    presses = [(incident_id, {"action": "dismiss", "state_token": "old"}, s) for s in admins[:8]]
    presses += [(incident_id, {"action": "dismiss", "state_token": token}, s) for s in admins[8:]]
    presses += [(incident_id, {"action": "dismiss", "state_token": token}, s) for s in viewers]
    answers = asyncio.run(_press_all(api.url, presses))

    codes = [a.get("outcome") or a["error"]["code"] for _, a in answers]
    assert codes.count("dismissed") == 1
    assert set(codes[:8]) <= {"stale", "already_decided"}
    assert set(codes[8:24]) <= {"dismissed", "already_decided"}
    assert codes[24:] == ["refused"] * 8
    presses_made = api.runtime.store.decisions.presses_for(incident_id)
    assert len(presses_made) == len(presses)
    assert sorted(p.outcome for p in presses_made) == sorted(
        "won" if c == "dismissed" else c for c in codes
    )
