"""The routes behind commands that once read only a local store: tokens, record checks,
the schema revision and the test card, over real HTTP, good input and bad."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.live_server import LiveServer, live_server
from watchkeeper.runtime import Runtime
from watchkeeper.timeline import record


@pytest.fixture
def server(runtime: Runtime) -> Iterator[LiveServer]:
    with live_server(runtime) as live:
        yield live


def test_tokens_are_listed_without_secrets_and_only_for_an_admin(server: LiveServer) -> None:
    with server.client("admin") as admin, server.client("viewer") as viewer:
        listed = admin.get("/api/v1/tokens")
        refused = viewer.get("/api/v1/tokens")
    assert listed.status_code == 200, listed.text
    tokens = listed.json()["tokens"]
    assert {t["name"] for t in tokens} >= {"test admin", "test viewer", "test reporter"}
    for token in tokens:
        assert set(token) == {"id", "name", "role", "created_at", "revoked_at"}
    for secret in server.tokens.values():
        assert secret not in listed.text
    assert refused.status_code == 403
    assert "this needs the admin role" in refused.json()["error"]["message"]


def test_revoke_takes_effect_says_when_done_twice_and_names_an_unknown_id(
    server: LiveServer,
) -> None:
    with server.client("admin") as admin:
        ids = {t["name"]: t["id"] for t in admin.get("/api/v1/tokens").json()["tokens"]}
        first = admin.post(f"/api/v1/tokens/{ids['test viewer']}/revoke")
        again = admin.post(f"/api/v1/tokens/{ids['test viewer']}/revoke")
        unknown = admin.post("/api/v1/tokens/999999/revoke")
        not_a_number = admin.post("/api/v1/tokens/abc/revoke")
        listed = {t["name"]: t for t in admin.get("/api/v1/tokens").json()["tokens"]}
    assert first.status_code == 200, first.text
    assert first.json()["already_revoked"] is False and first.json()["revoked_at"]
    assert again.status_code == 200 and again.json()["already_revoked"] is True
    assert again.json()["revoked_at"] == first.json()["revoked_at"]
    assert listed["test viewer"]["revoked_at"] == first.json()["revoked_at"]
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "not_found"
    assert "no token 999999" in unknown.json()["error"]["message"]
    assert not_a_number.status_code == 422
    with server.client("viewer") as viewer:
        assert viewer.get("/api/v1/runs").status_code == 401


def _signed(runtime: Runtime) -> dict[str, object]:
    body = {"format": record.FORMAT, "job": {"id": "j-1", "status": "done"}, "rounds": []}
    return record.sign(body, record.load_keys(runtime.settings))


def test_a_record_is_verified_with_the_servers_key(server: LiveServer) -> None:
    signed = _signed(server.runtime)
    tampered = {**signed, "job": {"id": "j-1", "status": "failed"}}
    with server.client("viewer") as viewer:
        valid = viewer.post("/api/v1/records/verify", content=json.dumps(signed))
        invalid = viewer.post("/api/v1/records/verify", json=tampered)
        unsigned = viewer.post("/api/v1/records/verify", json={"job": {"id": "j-1"}})
    assert valid.status_code == 200, valid.text
    assert valid.json() == {"valid": True, "reason": valid.json()["reason"]}
    assert valid.json()["reason"].startswith("valid: job j-1")
    assert invalid.json() == {
        "valid": False,
        "reason": "the signature does not match: the record was changed",
    }
    assert unsigned.json()["valid"] is False and "no signature" in unsigned.json()["reason"]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_bad_record_body_is_a_clear_4xx(server: LiveServer) -> None:
    with server.client("viewer") as viewer, server.client(None) as anonymous:
        garbled = viewer.post("/api/v1/records/verify", content=b"{not json")
        a_list = viewer.post("/api/v1/records/verify", json=[1, 2])
        huge = viewer.post("/api/v1/records/verify", json={"signature": {}, "pad": "x" * 400_000})
        nobody = anonymous.post("/api/v1/records/verify", json=_signed(server.runtime))
    assert garbled.status_code == 400
    assert garbled.json()["error"]["code"] == "malformed_json"
    assert "not valid JSON" in garbled.json()["error"]["message"]
    assert a_list.status_code == 422
    assert "a JSON object" in a_list.json()["error"]["message"]
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "too_large"
    assert nobody.status_code == 401


def test_the_schema_revision_of_the_servers_database(server: LiveServer) -> None:
    from watchkeeper.store.migrate import head_revision

    with server.client("viewer") as viewer, server.client(None) as anonymous:
        found = viewer.get("/api/v1/schema")
        nobody = anonymous.get("/api/v1/schema")
    assert found.status_code == 200, found.text
    assert found.json() == {"database": head_revision(), "code": head_revision()}
    assert nobody.status_code == 401


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_test_card_route_refuses_bad_chats_and_says_when_none_is_configured(
    server: LiveServer,
) -> None:
    with server.client("admin") as admin, server.client("viewer") as viewer:
        nowhere = admin.post("/api/v1/test-card", json={})
        bad = admin.post("/api/v1/test-card", json={"chats": ["irc:#ops"]})
        unconfigured = admin.post("/api/v1/test-card", json={"chats": ["discord:1"]})
        refused = viewer.post("/api/v1/test-card", json={})
    assert nowhere.status_code == 200, nowhere.text
    assert nowhere.json()["ok"] is False
    assert "no chat to post to" in nowhere.json()["cards"][0]["detail"]
    assert bad.status_code == 422 and "PLATFORM:CHAT" in bad.json()["error"]["message"]
    card = unconfigured.json()["cards"][0]
    assert card["chat"] == "discord:1" and card["state"] == "fail"
    assert card["detail"] == "[discord] has no bot token"
    assert refused.status_code == 403
