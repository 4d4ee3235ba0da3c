"""Built-in health checks against this machine's real numbers (and a fake NVML)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from watchkeeper.supervise import (
    DiskCheck,
    GpuCheck,
    HealthStatus,
    HeartbeatBoard,
    HeartbeatCheck,
    ManualClock,
    MemoryCheck,
)
from watchkeeper.supervise.health_checks import load_nvml

pytestmark = pytest.mark.anyio

H, D, U = HealthStatus.HEALTHY, HealthStatus.DEGRADED, HealthStatus.UNHEALTHY


async def test_heartbeat_age_degrades_then_fails() -> None:
    clock = ManualClock()
    board = HeartbeatBoard(clock)
    check = HeartbeatCheck("agent-loop", board, degraded_after_s=30, unhealthy_after_s=120)
    assert (await check.run()).status is U  # never beaten
    board.beat("agent-loop")
    clock.advance(10)
    assert (await check.run()).status is H
    clock.advance(25)
    result = await check.run()
    assert (result.status, result.data["age_s"]) == (D, 35.0)
    clock.advance(100)
    assert (await check.run()).status is U
    board.beat("agent-loop")
    assert (await check.run()).status is H


async def test_memory_thresholds_on_rss_and_available_memory() -> None:
    rss = psutil.Process(os.getpid()).memory_info().rss
    available = psutil.virtual_memory().available
    assert (await MemoryCheck(rss_warning_bytes=rss * 100).run()).status is H
    assert (await MemoryCheck(rss_warning_bytes=rss // 2).run()).status is D
    assert (await MemoryCheck(rss_critical_bytes=rss // 2).run()).status is U
    assert (await MemoryCheck(available_warning_bytes=available * 2).run()).status is D
    assert (await MemoryCheck(available_critical_bytes=available * 2).run()).status is U
    result = await MemoryCheck(available_warning_bytes=1).run()
    assert result.status is H
    assert result.data["available_bytes"] == pytest.approx(available, rel=0.5)


async def test_disk_check_looks_at_free_space_not_total(tmp_path: Path) -> None:
    usage = psutil.disk_usage(str(tmp_path))
    between = (usage.free + usage.total) // 2 if usage.total > usage.free else usage.free
    healthy = await DiskCheck(tmp_path, warning_free_bytes=usage.free // 2).run()
    assert healthy.status is H
    # A threshold above free space but below the total must trip: the check reads free space.
    assert (await DiskCheck(tmp_path, warning_free_bytes=between).run()).status is D
    assert (await DiskCheck(tmp_path, critical_free_bytes=usage.free * 2).run()).status is U
    assert healthy.data["total_bytes"] == usage.total


async def test_disk_check_on_a_missing_path_is_unhealthy(tmp_path: Path) -> None:
    result = await DiskCheck(tmp_path / "missing", warning_free_bytes=1).run()
    assert result.status is U


async def test_gpu_check_reports_not_present_without_nvml() -> None:
    result = await GpuCheck(loader=lambda: None).run()
    assert (result.status, result.data["present"]) == (H, False)


async def test_gpu_check_on_this_machine_reports_cleanly() -> None:
    result = await GpuCheck().run()
    if load_nvml() is None:
        assert result.data == {"present": False}
    assert result.status is H or result.data["present"] is True


class FakeNVMLError(Exception):
    pass


@dataclass
class FakeNVML:
    """The part of the pynvml API the check uses, with set memory figures."""

    used: list[int]
    total: int = 100
    init_error: bool = False
    shut_down: bool = False

    NVMLError = FakeNVMLError

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError("Driver Not Loaded")

    def nvmlShutdown(self) -> None:
        self.shut_down = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.used)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(used=self.used[handle], total=self.total)


@pytest.mark.parametrize(("used", "status"), [([10, 50], H), ([10, 92], D), ([99, 10], U), ([], H)])
async def test_gpu_memory_thresholds_through_nvml(used: list[int], status: HealthStatus) -> None:
    nvml = FakeNVML(used)
    result = await GpuCheck(loader=lambda: nvml).run()
    assert result.status is status
    assert result.data["present"] is bool(used)
    assert nvml.shut_down


async def test_gpu_check_with_nvml_but_no_driver_reports_not_present() -> None:
    result = await GpuCheck(loader=lambda: FakeNVML([], init_error=True)).run()
    assert (result.status, result.data["present"]) == (H, False)
    assert "Driver Not Loaded" in result.detail
