"""An admin's price override over HTTP: it prices new events, never the file's models."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_settings
from tests.support.live_server import LiveServer, live_server
from watchkeeper.clock import ManualClock
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

MILLION = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
FILE_PRICES = {"acme/coder-1": {"input_per_mtok": 1, "output_per_mtok": 4}}


@pytest.fixture
def server(tmp_path: Path, store: Store, clock: ManualClock) -> Iterator[LiveServer]:
    settings = make_settings(tmp_path, store.url, prices=FILE_PRICES)
    runtime = Runtime.open(settings, clock=clock, store=store, notifier=OpsNotifier(settings.ops))
    try:
        with live_server(runtime) as live:
            yield live
    finally:
        runtime.sweeper.close()


def _call(server: LiveServer, provider: str, model: str) -> dict[str, object]:
    event = {"phase": "implementer", "provider": provider, "model": model, **MILLION}
    with server.client("reporter") as http:
        answer = http.post("/api/v1/events/batch", json={"events": [event]})
    assert answer.status_code == 201, answer.text
    body: dict[str, object] = answer.json()
    return body


def _listed(server: LiveServer) -> dict[str, dict[str, object]]:
    with server.client("viewer") as http:
        models = http.get("/api/v1/models").json()["models"]
    return {f"{m['provider']}/{m['model']}": m for m in models}


def test_an_override_prices_new_calls_of_an_unpriced_model(server: LiveServer) -> None:
    before = _call(server, "inhouse", "Tuned-7b")
    assert before["cost"] == 0 and before["unpriced"] == 1
    assert _listed(server)["inhouse/tuned-7b"]["price"] == {
        "source": None,
        "input_per_mtok": None,
        "output_per_mtok": None,
        "note": "no known price",
    }

    with server.client("admin") as http:
        set_ = http.put(
            "/api/v1/models/inhouse/tuned-7b", json={"input_per_mtok": 2, "output_per_mtok": 6}
        )
    assert set_.status_code == 200, set_.text
    assert set_.json()["price"]["source"] == "override"
    assert set_.json()["override"]["set_by"] == "@test admin"

    after = _call(server, "inhouse", "Tuned-7b")
    assert after["cost"] == pytest.approx(8.0) and after["unpriced"] == 0
    listed = _listed(server)["inhouse/tuned-7b"]
    assert listed["calls"] == 2 and listed["unpriced_calls"] == 1  # the first keeps its fate

    with server.client("admin") as http:
        assert http.delete("/api/v1/models/inhouse/tuned-7b").status_code == 200
        assert http.delete("/api/v1/models/inhouse/tuned-7b").status_code == 404
    assert _call(server, "inhouse", "tuned-7b")["unpriced"] == 1


def test_the_file_wins_and_bad_prices_are_explained(server: LiveServer) -> None:
    with server.client("admin") as http:
        filed = http.put(
            "/api/v1/models/acme/coder-1", json={"input_per_mtok": 9, "output_per_mtok": 9}
        )
        negative = http.put(
            "/api/v1/models/inhouse/x", json={"input_per_mtok": -1, "output_per_mtok": 1}
        )
        words = http.put(
            "/api/v1/models/inhouse/x", json={"input_per_mtok": "cheap", "output_per_mtok": 1}
        )
    with server.client("viewer") as http:
        refused = http.put(
            "/api/v1/models/inhouse/x", json={"input_per_mtok": 1, "output_per_mtok": 1}
        )
    assert filed.status_code == 409
    assert "configuration file" in filed.json()["error"]["message"]
    assert negative.status_code == 422
    assert "cannot be negative" in negative.json()["error"]["message"]
    assert words.status_code == 422 and "traceback" not in words.text.lower()
    assert refused.status_code == 403
    assert _call(server, "acme", "coder-1")["cost"] == pytest.approx(5.0)
    assert _listed(server)["acme/coder-1"]["price"]["source"] == "config"


def test_a_model_not_called_for_ninety_days_is_no_longer_in_use(server: LiveServer) -> None:
    # The clock stands at 2026-01-05 12:00 UTC.
    old = {"phase": "implementer", "provider": "inhouse", "model": "retired", **MILLION}
    with server.client("reporter") as http:
        for at in ("2025-10-01T00:00:00Z", "2025-10-07T13:00:00Z"):
            answer = http.post("/api/v1/events/batch", json={"events": [{**old, "at": at}]})
            assert answer.status_code == 201, answer.text
    listed = _listed(server)
    assert "inhouse/retired" in listed and listed["inhouse/retired"]["calls"] == 1
