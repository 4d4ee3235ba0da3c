"""Built-in health checks: heartbeat age, memory, disk, GPU and an HTTP dependency."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from types import ModuleType
from typing import Any, Protocol

import httpx
import psutil

from watchkeeper.supervise.clock import Clock, MonotonicClock
from watchkeeper.supervise.health import CheckResult, HealthStatus

HEALTHY, DEGRADED, UNHEALTHY = HealthStatus.HEALTHY, HealthStatus.DEGRADED, HealthStatus.UNHEALTHY


def _grade_low(value: float, warning: float | None, critical: float | None) -> HealthStatus:
    """Status for a value that is bad when it falls to or below a threshold."""
    if critical is not None and value <= critical:
        return UNHEALTHY
    if warning is not None and value <= warning:
        return DEGRADED
    return HEALTHY


def _grade_high(value: float, warning: float | None, critical: float | None) -> HealthStatus:
    """Status for a value that is bad when it rises to or above a threshold."""
    if critical is not None and value >= critical:
        return UNHEALTHY
    if warning is not None and value >= warning:
        return DEGRADED
    return HEALTHY


class HeartbeatSource(Protocol):
    """Anything that knows when a named loop last beat (a board, a supervisor handle)."""

    def last_beat(self, name: str) -> float | None: ...


class HeartbeatBoard:
    """Where named agent loops record their heartbeats (on ``clock``)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or MonotonicClock()
        self._beats: dict[str, float] = {}
        self._lock = threading.Lock()

    def beat(self, name: str) -> None:
        """Record that loop ``name`` is alive now; safe from any thread."""
        now = self.clock.now()
        with self._lock:
            self._beats[name] = now

    def last_beat(self, name: str) -> float | None:
        return self._beats.get(name)


class HeartbeatCheck:
    """Degraded, then unhealthy, as the named loop's last heartbeat grows old."""

    def __init__(
        self,
        loop_name: str,
        source: HeartbeatSource,
        *,
        degraded_after_s: float,
        unhealthy_after_s: float,
        clock: Clock | None = None,
    ) -> None:
        self.name = f"heartbeat:{loop_name}"
        self.loop_name = loop_name
        self.source = source
        self.degraded_after_s = degraded_after_s
        self.unhealthy_after_s = unhealthy_after_s
        self.clock: Clock = clock or getattr(source, "clock", None) or MonotonicClock()

    async def run(self) -> CheckResult:
        last = self.source.last_beat(self.loop_name)
        if last is None:
            return CheckResult(UNHEALTHY, f"loop {self.loop_name!r} has never beaten")
        age = max(self.clock.now() - last, 0.0)
        status = _grade_high(age, self.degraded_after_s, self.unhealthy_after_s)
        return CheckResult(status, f"last heartbeat {age:.1f} s ago", {"age_s": age})


@dataclass(eq=False, kw_only=True)
class MemoryCheck:
    """Thresholds on this process's RSS and on the machine's available memory (bytes)."""

    name = "memory"

    rss_warning_bytes: int | None = None
    rss_critical_bytes: int | None = None
    available_warning_bytes: int | None = None
    available_critical_bytes: int | None = None
    pid: int | None = None

    def __post_init__(self) -> None:
        self._process = psutil.Process(self.pid or os.getpid())

    async def run(self) -> CheckResult:
        rss = self._process.memory_info().rss
        available = psutil.virtual_memory().available
        rss_status = _grade_high(rss, self.rss_warning_bytes, self.rss_critical_bytes)
        avail_status = _grade_low(
            available, self.available_warning_bytes, self.available_critical_bytes
        )
        status = max(rss_status, avail_status, key=lambda s: s.rank)
        detail = (
            f"rss {rss / 2**20:.0f} MiB ({rss_status}), "
            f"available {available / 2**20:.0f} MiB ({avail_status})"
        )
        return CheckResult(status, detail, {"rss_bytes": rss, "available_bytes": available})


class DiskCheck:
    """Thresholds on the free space (not the total) of the filesystem holding ``path``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        warning_free_bytes: int | None = None,
        critical_free_bytes: int | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.name = f"disk:{self.path}"
        self.warning_free_bytes = warning_free_bytes
        self.critical_free_bytes = critical_free_bytes

    async def run(self) -> CheckResult:
        try:
            usage = psutil.disk_usage(self.path)
        except OSError as exc:
            return CheckResult(UNHEALTHY, f"cannot stat {self.path}: {exc}")
        status = _grade_low(usage.free, self.warning_free_bytes, self.critical_free_bytes)
        return CheckResult(
            status,
            f"{usage.free / 2**30:.2f} GiB free on {self.path}",
            {"free_bytes": usage.free, "total_bytes": usage.total},
        )


def load_nvml() -> ModuleType | None:
    """The ``pynvml`` module (from nvidia-ml-py) if installed, else ``None``."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


@dataclass(eq=False, kw_only=True)
class GpuCheck:
    """GPU memory use through NVML.

    A host with no GPU is healthy with ``present: False`` unless ``required``: on a GPU
    host, a missing NVML library, a driver that is not loaded or no device found is then
    unhealthy, with what NVML said.
    """

    name = "gpu"

    memory_warning_fraction: float = 0.9
    memory_critical_fraction: float = 0.98
    #: The host has a GPU and the work needs it: no usable GPU is unhealthy, not absent.
    required: bool = False
    loader: Callable[[], Any] = load_nvml

    async def run(self) -> CheckResult:
        nvml = self.loader()
        if nvml is None:
            return self._absent("NVML not installed: pip install nvidia-ml-py")
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:  # no library, or installed without a loaded driver
            return self._absent(f"NVML: {exc}")
        try:
            return self._inspect(nvml)
        except nvml.NVMLError as exc:  # a device that stops answering (GPU is lost, say)
            return CheckResult(UNHEALTHY, f"cannot read the GPUs: NVML: {exc}", {"present": True})
        finally:
            nvml.nvmlShutdown()

    def _absent(self, why: str, **data: Any) -> CheckResult:
        if self.required:
            return CheckResult(
                UNHEALTHY,
                f"no usable GPU, and one is required ({why})",
                {"present": False, **data, "required": True},
            )
        return CheckResult(HEALTHY, f"no GPU present ({why})", {"present": False, **data})

    def _inspect(self, nvml: Any) -> CheckResult:
        count = int(nvml.nvmlDeviceGetCount())
        if count == 0:
            return self._absent("NVML found no device", count=0)
        fractions = []
        for index in range(count):
            info = nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(index))
            fractions.append(info.used / info.total if info.total else 0.0)
        top = max(fractions)
        status = _grade_high(top, self.memory_warning_fraction, self.memory_critical_fraction)
        detail = f"{count} GPU(s), fullest at {top:.0%} memory"
        return CheckResult(
            status, detail, {"present": True, "count": count, "memory_used": fractions}
        )


@dataclass(eq=False)
class HttpCheck:
    """A dependency reached over HTTP: unhealthy when down, degraded when slow."""

    name: str
    url: str
    _: KW_ONLY
    timeout_s: float = 5.0
    degraded_latency_s: float | None = None
    healthy_statuses: range = range(200, 400)
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    #: Measures the answer's latency.
    clock: Clock = field(default_factory=MonotonicClock, repr=False)

    async def run(self) -> CheckResult:
        started = self.clock.now()
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s, transport=self.transport) as c:
                response = await c.get(self.url)
        except httpx.HTTPError as exc:
            return CheckResult(UNHEALTHY, f"{self.url} unreachable: {exc!r}")
        latency = self.clock.now() - started
        data = {"status_code": response.status_code, "latency_s": latency}
        if response.status_code not in self.healthy_statuses:
            return CheckResult(UNHEALTHY, f"{self.url} answered {response.status_code}", data)
        slow = self.degraded_latency_s is not None and latency > self.degraded_latency_s
        status = DEGRADED if slow else HEALTHY
        return CheckResult(
            status, f"{self.url} answered {response.status_code} in {latency:.3f} s", data
        )
