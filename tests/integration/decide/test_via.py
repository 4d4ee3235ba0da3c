"""Where a press came from is the channel that carried it, never what the caller says."""

from __future__ import annotations

import pytest

from watchkeeper import Client

from ...support.live_server import LiveServer
from .test_surfaces import failed_incident


def _vias(server: LiveServer, incident_id: int) -> list[str]:
    return [p.via for p in server.runtime.store.decisions.presses_for(incident_id)]


def test_an_api_press_that_claims_the_dashboard_is_refused_and_recorded_as_nothing(
    api: LiveServer,
) -> None:
    incident_id = failed_incident(api)
    with api.client("admin") as http:
        state = http.get(f"/api/v1/incidents/{incident_id}").json()["state_token"]
        claimed = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "dismiss", "state_token": state, "via": "dashboard"},
        )
        assert claimed.status_code == 400, claimed.text
        error = claimed.json()["error"]
        assert error["field"] == "via"
        assert "dashboard" in error["message"]
        assert "remove" in error["message"]
        # The header that tells the command line apart cannot claim the dashboard either.
        headed = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "dismiss", "state_token": state},
            headers={"x-watchkeeper-client": "dashboard"},
        )
        assert headed.status_code == 200, headed.text
        assert headed.json()["decision"]["via"] == "api"
    assert "dashboard" not in _vias(api, incident_id)
    assert _vias(api, incident_id) == ["api"]


def test_a_body_via_of_cli_is_ignored_and_the_api_is_recorded(api: LiveServer) -> None:
    incident_id = failed_incident(api)
    with api.client("admin") as http:
        state = http.get(f"/api/v1/incidents/{incident_id}").json()["state_token"]
        pressed = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "dismiss", "state_token": state, "via": "cli"},
        )
        assert pressed.status_code == 200, pressed.text
        assert pressed.json()["decision"]["via"] == "api"


def test_the_sdk_records_the_api_and_the_openapi_schema_offers_no_via(api: LiveServer) -> None:
    incident_id = failed_incident(api)
    with Client(api.url, api.tokens["admin"]) as client:
        assert client.incidents.decide(incident_id, "dismiss")["decision"]["via"] == "api"
    assert _vias(api, incident_id) == ["api"]
    with api.client(None) as http:
        schema = http.get("/openapi.json").json()
    body = schema["components"]["schemas"]["DecideBody"]
    assert "via" not in body["properties"]


def test_the_sdk_cannot_claim_the_dashboard(api: LiveServer) -> None:
    incident_id = failed_incident(api)
    with (
        Client(api.url, api.tokens["admin"]) as client,
        pytest.raises(ValueError, match="dashboard"),
    ):
        client.incidents.decide(incident_id, "dismiss", via="dashboard")  # type: ignore[arg-type]
    assert _vias(api, incident_id) == []
