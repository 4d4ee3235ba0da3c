"""The health endpoint and the HTTP dependency check, over real loopback HTTP."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import httpx
import pytest

from watchkeeper.supervise import (
    CheckResult,
    HealthFlag,
    HealthMonitor,
    HealthStatus,
    HttpCheck,
    ManualClock,
    serve_health,
)

if TYPE_CHECKING:
    from conftest import RecordingServer

pytestmark = pytest.mark.anyio


class Fixed:
    def __init__(self, status: HealthStatus) -> None:
        self.name = "fixed"
        self.status = status

    async def run(self) -> CheckResult:
        return CheckResult(self.status, "as told")


@pytest.mark.parametrize(
    ("status", "code"),
    [(HealthStatus.HEALTHY, 200), (HealthStatus.DEGRADED, 200), (HealthStatus.UNHEALTHY, 503)],
)
async def test_endpoint_answers_json_with_the_status_code(status: HealthStatus, code: int) -> None:
    monitor = HealthMonitor(clock=ManualClock(), failure_threshold=1, flag=HealthFlag())
    monitor.register(Fixed(status))
    await monitor.run_once()
    server = await serve_health(monitor, port=0)
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(server.url)
    finally:
        await server.close()
    assert response.status_code == code
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["status"] == status.value
    assert body["checks"]["fixed"]["detail"] == "as told"


async def test_endpoint_turns_503_when_the_flag_is_lowered_and_refuses_other_paths() -> None:
    monitor = HealthMonitor(clock=ManualClock(), flag=HealthFlag())
    server = await serve_health(monitor, port=0, host="127.0.0.1")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}") as client:
            assert (await client.get("/healthz")).status_code == 200
            monitor.flag.set(False, "shutting down")
            lowered = await client.get("/healthz")
            assert lowered.status_code == 503
            assert lowered.json()["flag"] == {"healthy": False, "reason": "shutting down"}
            assert (await client.get("/elsewhere")).status_code == 404
            assert (await client.post("/healthz")).status_code == 405
    finally:
        await server.close()


async def test_http_check_is_healthy_when_the_dependency_answers(
    recording_server: RecordingServer,
) -> None:
    result = await HttpCheck("api", recording_server.url + "/ping").run()
    assert result.status is HealthStatus.HEALTHY
    assert result.data["status_code"] == 200
    assert recording_server.requests[0].path == "/ping"


async def test_http_check_is_unhealthy_on_an_error_status(
    recording_server: RecordingServer,
) -> None:
    recording_server.status = 500
    result = await HttpCheck("api", recording_server.url).run()
    assert result.status is HealthStatus.UNHEALTHY
    assert "500" in result.detail


async def test_http_check_is_degraded_when_slower_than_allowed(
    recording_server: RecordingServer,
) -> None:
    result = await HttpCheck("api", recording_server.url, degraded_latency_s=0.0).run()
    assert result.status is HealthStatus.DEGRADED


async def test_http_check_is_unhealthy_when_nothing_listens() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound but not listening: connections are refused
        result = await HttpCheck("api", f"http://127.0.0.1:{port}/", timeout_s=5).run()
    assert result.status is HealthStatus.UNHEALTHY
    assert "unreachable" in result.detail
