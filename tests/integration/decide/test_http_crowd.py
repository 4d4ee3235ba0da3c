"""64 presses of one card in flight at once over real HTTP, from one async client."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from watchkeeper.store.tokens import Role

from ...support.live_server import LiveServer
from ..recorder import Recorder
from .test_surfaces import failed_incident

ADMINS = 56
VIEWERS = 8


async def _press_together(
    url: str, incident_id: int, state_token: str, secrets: list[str]
) -> list[httpx.Response]:
    path = f"/api/v1/incidents/{incident_id}/decide"
    body = {"action": "retry", "state_token": state_token}
    limits = httpx.Limits(max_connections=len(secrets))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        return list(
            await asyncio.gather(
                *(
                    client.post(path, json=body, headers={"Authorization": f"Bearer {secret}"})
                    for secret in secrets
                )
            )
        )


def _crowd(api: LiveServer) -> tuple[list[str], set[str]]:
    """Secrets of 56 admins and 8 viewers, interleaved; the viewers' secrets."""
    now = api.runtime.clock()
    tokens = api.runtime.store.tokens
    admins = [tokens.create(Role.ADMIN, f"p{i}", now)[1] for i in range(ADMINS)]
    viewers = [tokens.create(Role.VIEWER, f"v{i}", now)[1] for i in range(VIEWERS)]
    secrets = list(admins)
    for index, secret in enumerate(viewers):
        secrets.insert(index * (len(secrets) // VIEWERS), secret)
    return secrets, set(viewers)


def test_sixty_four_presses_in_flight_one_winner_the_rest_told_who(
    api: LiveServer, service: Recorder
) -> None:
    incident_id = failed_incident(api)
    state_token = api.runtime.store.incidents.get(incident_id).state_token
    secrets, viewers = _crowd(api)
    answers = asyncio.run(_press_together(api.url, incident_id, state_token, secrets))
    by_secret = dict(zip(secrets, answers, strict=True))

    won = [r for r in answers if r.status_code == 200]
    assert len(won) == 1, [r.text for r in answers if r.status_code == 200]
    winner: dict[str, Any] = won[0].json()
    assert winner["outcome"] == "done"
    assert winner["journal"]["status"] == "done"
    name = winner["decision"]["by"]
    assert name.startswith("@p")

    lost = [r for s, r in by_secret.items() if s not in viewers and r.status_code != 200]
    assert len(lost) == ADMINS - 1
    assert {r.status_code for r in lost} == {409}
    for response in lost:
        error = response.json()["error"]
        assert error["code"] == "already_decided"
        assert error["message"].startswith(f"already decided: Retry by {name} on the API at ")
        assert error["press"]["decision"]["by"] == name

    refused = [by_secret[s] for s in viewers]
    assert {r.status_code for r in refused} == {403}
    assert {r.json()["error"]["code"] for r in refused} == {"refused"}

    # The owning system was asked once, and every press is in the history.
    assert [(r.method, r.path) for r in service.requests] == [("POST", "/retry/api-1")]
    presses = api.runtime.store.decisions.presses_for(incident_id)
    outcomes = [p.outcome for p in presses]
    assert len(presses) == ADMINS + VIEWERS
    assert outcomes.count("won") == 1
    assert outcomes.count("already_decided") == ADMINS - 1
    assert outcomes.count("refused") == VIEWERS
    assert [p.actor for p in presses if p.outcome == "won"] == [name]
    journal = api.runtime.store.decisions.actions_for_incident(incident_id)
    assert [(j.action, j.status.value, j.actor) for j in journal] == [("retry", "done", name)]
