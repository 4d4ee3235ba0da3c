"""In-process supervision: a supervision tree, circuit breakers and health checks.

Importable on its own, without a database or a running server.
"""

from __future__ import annotations

from watchkeeper.supervise.backoff import Backoff
from watchkeeper.supervise.breaker import CircuitBreaker
from watchkeeper.supervise.breaker_calls import RecentCall
from watchkeeper.supervise.breaker_state import (
    BreakerState,
    BreakerStateStore,
    CircuitState,
    FileStateStore,
    InMemoryStateStore,
)
from watchkeeper.supervise.breaker_types import (
    BreakerStateChange,
    BreakerStatistics,
    FailureRateWindow,
)
from watchkeeper.supervise.builder import SupervisorBuilder, SupervisorSpec
from watchkeeper.supervise.clock import Clock, ManualClock, MonotonicClock, Timer, WallClock
from watchkeeper.supervise.errors import (
    CircuitOpenError,
    ConfigurationError,
    RestartIntensityExceeded,
    StartError,
    SuperviseError,
    SupervisorStoppedError,
    TreeFixedError,
    UnknownChild,
)
from watchkeeper.supervise.events import (
    ChildExited,
    ChildHeartbeat,
    ChildHeld,
    ChildRestarting,
    ChildStarted,
    Event,
    ExitReason,
    Subscription,
    SupervisorGaveUp,
)
from watchkeeper.supervise.handle import ChildInfo, SupervisorHandle, SupervisorStatistics
from watchkeeper.supervise.health import (
    GLOBAL_HEALTH_FLAG,
    CheckReport,
    CheckResult,
    HealthCheck,
    HealthFlag,
    HealthMonitor,
    HealthReport,
    HealthStatus,
    set_healthy,
)
from watchkeeper.supervise.health_checks import (
    DiskCheck,
    GpuCheck,
    HeartbeatBoard,
    HeartbeatCheck,
    HttpCheck,
    MemoryCheck,
)
from watchkeeper.supervise.health_http import HealthServer, health_payload, serve_health
from watchkeeper.supervise.policy import RestartPolicy
from watchkeeper.supervise.reporter import ChildReporter, ReporterStatistics
from watchkeeper.supervise.spec import (
    ChildContext,
    ChildSpec,
    Restart,
    coroutine_child,
    process_child,
    supervisor_child,
)
from watchkeeper.supervise.strategies import Strategy
from watchkeeper.supervise.supervisor import Supervisor

__all__ = [
    "GLOBAL_HEALTH_FLAG",
    "Backoff",
    "BreakerState",
    "BreakerStateChange",
    "BreakerStateStore",
    "BreakerStatistics",
    "CheckReport",
    "CheckResult",
    "ChildContext",
    "ChildExited",
    "ChildHeartbeat",
    "ChildHeld",
    "ChildInfo",
    "ChildReporter",
    "ChildRestarting",
    "ChildSpec",
    "ChildStarted",
    "CircuitBreaker",
    "CircuitOpenError",
    "CircuitState",
    "Clock",
    "ConfigurationError",
    "DiskCheck",
    "Event",
    "ExitReason",
    "FailureRateWindow",
    "FileStateStore",
    "GpuCheck",
    "HealthCheck",
    "HealthFlag",
    "HealthMonitor",
    "HealthReport",
    "HealthServer",
    "HealthStatus",
    "HeartbeatBoard",
    "HeartbeatCheck",
    "HttpCheck",
    "InMemoryStateStore",
    "ManualClock",
    "MemoryCheck",
    "MonotonicClock",
    "RecentCall",
    "ReporterStatistics",
    "Restart",
    "RestartIntensityExceeded",
    "RestartPolicy",
    "StartError",
    "Strategy",
    "Subscription",
    "SuperviseError",
    "Supervisor",
    "SupervisorBuilder",
    "SupervisorGaveUp",
    "SupervisorHandle",
    "SupervisorSpec",
    "SupervisorStatistics",
    "SupervisorStoppedError",
    "Timer",
    "TreeFixedError",
    "UnknownChild",
    "WallClock",
    "coroutine_child",
    "health_payload",
    "process_child",
    "serve_health",
    "set_healthy",
    "supervisor_child",
]
