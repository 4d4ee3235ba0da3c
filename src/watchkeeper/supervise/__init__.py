"""In-process supervision: a supervision tree, circuit breakers and health checks.

Importable on its own, without a database or a running server.
"""

from __future__ import annotations

from watchkeeper.supervise.backoff import Backoff
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
)
from watchkeeper.supervise.events import (
    ChildExited,
    ChildHeartbeat,
    ChildRestarting,
    ChildStarted,
    Event,
    ExitReason,
    Subscription,
    SupervisorGaveUp,
)
from watchkeeper.supervise.handle import ChildInfo, SupervisorHandle, SupervisorStatistics
from watchkeeper.supervise.policy import RestartPolicy
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
    "Backoff",
    "ChildContext",
    "ChildExited",
    "ChildHeartbeat",
    "ChildInfo",
    "ChildRestarting",
    "ChildSpec",
    "ChildStarted",
    "CircuitOpenError",
    "Clock",
    "ConfigurationError",
    "Event",
    "ExitReason",
    "ManualClock",
    "MonotonicClock",
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
    "WallClock",
    "coroutine_child",
    "process_child",
    "supervisor_child",
]
