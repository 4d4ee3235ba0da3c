"""Deciding over HTTP, from the SDK and from the command line."""

from __future__ import annotations

import subprocess

import pytest

from watchkeeper import Client
from watchkeeper.errors import ClientError

from ...support.cli import wk
from ...support.live_server import LiveServer
from ..helpers import reports_for, start, sweep
from ..recorder import Recorder


def failed_incident(server: LiveServer, run_id: str = "api-1") -> int:
    start(server.runtime, run_id, "swarm_task", effects="none")
    reports_for(server.runtime).fail("swarm_task", run_id, "worker died", None, None)
    return sweep(server.runtime).applied.opened[0]


def test_decide_over_http_first_wins_and_losers_learn_who(
    api: LiveServer, service: Recorder
) -> None:
    incident_id = failed_incident(api)
    with api.client("admin") as http:
        shown = http.get(f"/api/v1/incidents/{incident_id}").json()
        assert [b["label"] for b in shown["buttons"]] == ["Retry", "Dismiss", "Ask to diagnose"]
        won = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "retry", "state_token": shown["state_token"]},
        )
        assert won.status_code == 200, won.text
        assert won.json()["outcome"] == "done"
        assert won.json()["journal"]["status"] == "done"
        lost = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "dismiss", "state_token": shown["state_token"]},
        )
        assert lost.status_code == 409
        assert lost.json()["error"]["code"] == "already_decided"
        assert lost.json()["error"]["message"].startswith(
            "already decided: Retry by @test admin on the API at"
        )
        after = http.get(f"/api/v1/incidents/{incident_id}").json()
    assert after["decision"]["label"] == "Retry"
    assert [p["outcome"] for p in after["presses"]] == ["won", "already_decided"]
    assert [j["status"] for j in after["journal"]] == ["done"]
    assert [b["action"] for b in after["buttons"]] == ["diagnose"]
    assert len(service.requests) == 1


def test_viewers_read_and_diagnose_but_may_not_act(api: LiveServer, service: Recorder) -> None:
    incident_id = failed_incident(api)
    with api.client("viewer") as http:
        token = http.get(f"/api/v1/incidents/{incident_id}").json()["state_token"]
        refused = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "retry", "state_token": token},
        )
        assert refused.status_code == 403
        assert (
            refused.json()["error"]["message"]
            == "only admins act: @test viewer is not an admin on the API"
        )
        diagnosed = http.post(f"/api/v1/incidents/{incident_id}/diagnose")
        assert diagnosed.status_code == 200
        assert "worker died" in diagnosed.json()["diagnosis"]
        stale = http.post(
            f"/api/v1/incidents/{incident_id}/decide",
            json={"action": "bogus", "state_token": token},
        )
        assert stale.status_code == 422
    assert service.requests == []


def test_sdk_decides_and_switches_runbooks(api: LiveServer, service: Recorder) -> None:
    incident_id = failed_incident(api)
    with Client(api.url, api.tokens["admin"]) as client:
        assert client.incidents.decide(incident_id, "dismiss")["outcome"] == "dismissed"
        with pytest.raises(ClientError) as caught:
            client.incidents.decide(incident_id, "retry")
        assert caught.value.status == 409
        names = {r["name"]: r["enabled"] for r in client.runbooks.list()}
        assert names == {
            "retry_failed_without_effects": False,
            "retry_out_of_attempts": False,
            "close_abandoned_turns": False,
        }
        switched = client.runbooks.switch("retry_failed_without_effects", True)
        assert switched["enabled"] is True
        assert switched["source"] == "@test admin"
        with pytest.raises(ClientError) as unknown:
            client.runbooks.switch("reboot_everything", True)
        assert unknown.value.status == 404
    with Client(api.url, api.tokens["viewer"]) as viewer, pytest.raises(ClientError) as denied:
        viewer.runbooks.switch("retry_failed_without_effects", False)
    assert denied.value.status == 403


def test_cli_decide_and_diagnose(api: LiveServer, service: Recorder) -> None:
    incident_id = failed_incident(api)
    env = {"WATCHKEEPER_URL": api.url, "WATCHKEEPER_TOKEN": api.tokens["admin"]}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return wk(*args, env=env)

    diagnosis = cli("diagnose", str(incident_id))
    assert diagnosis.returncode == 0, diagnosis.stderr
    assert "worker died" in diagnosis.stdout
    listed = cli("incidents")
    assert "swarm_task" in listed.stdout
    won = cli("decide", str(incident_id), "retry")
    assert won.returncode == 0, won.stderr
    assert won.stdout.startswith("Retry done")
    lost = cli("decide", str(incident_id), "dismiss")
    assert lost.returncode == 1
    assert "already decided: Retry by @test admin on the command line" in lost.stderr
    assert lost.stdout == ""  # a refusal is an error: stderr
    assert "Traceback" not in lost.stderr
    assert len(service.requests) == 1
