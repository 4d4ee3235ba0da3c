"""`watchkeeper show KIND/RUN` and the single-run API: status, verdict, incident, card."""

from __future__ import annotations

from watchkeeper.clock import ManualClock
from watchkeeper.runtime import Runtime
from watchkeeper.store.queueing import NewDelivery

from ..support.cli import wk
from ..support.live_server import live_server
from .helpers import start, sweep


def test_a_stalled_run_shows_its_verdict_incident_and_card(
    runtime: Runtime, clock: ManualClock
) -> None:
    start(runtime, "r-1", budget_s=60, lease_s=3600)
    sweep(runtime)
    clock.advance(61)
    (opened,) = sweep(runtime).applied.opened
    incident = runtime.store.incidents.list("live")[0]
    card = NewDelivery(f"card-{incident.id}", incident.id, "card", "slack", {"chat": "C1"}, {})
    runtime.store.outbox.enqueue([card], clock())
    with live_server(runtime) as server:
        with server.client("viewer") as http:
            body = http.get("/api/v1/runs/crawl/r-1").json()
        shown = wk("show", "crawl/r-1", "--server", server.url, "--token", server.tokens["viewer"])
    assert body["status"] == "running"
    assert body["verdict"]["condition"] == "stalled"
    assert body["incident_id"] == incident.id
    assert body["decision"] is None
    assert body["card"]["state"] == "pending" and body["card"]["channel"] == "slack"
    assert shown.returncode == 0, shown.stderr
    assert "stalled since" in shown.stdout
    assert f"incident:  {incident.id}" in shown.stdout
    assert "card:      pending on slack" in shown.stdout
    assert opened is not None
