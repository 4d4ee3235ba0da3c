"""Child specs: what a supervisor starts, how it restarts it, how it stops it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, Union, Unpack

from watchkeeper.supervise.errors import ConfigurationError
from watchkeeper.supervise.policy import Restart, RestartPolicy
from watchkeeper.supervise.strategies import Strategy

__all__ = [
    "ChildContext",
    "ChildOptions",
    "ChildSpec",
    "CoroutineFactory",
    "CoroutineTarget",
    "ProcessTarget",
    "Restart",
    "SupervisorSpec",
    "SupervisorTarget",
    "Target",
    "coroutine_child",
    "process_child",
    "supervisor_child",
]


class ChildContext(Protocol):
    """Given to a coroutine child: how it talks to its supervisor."""

    @property
    def name(self) -> str:
        """The child's name in its supervisor."""

    @property
    def path(self) -> str:
        """The path of the supervisor that runs this child (``root/sub``)."""

    @property
    def attempt(self) -> int:
        """0 for the first start, then the number of restarts in a row."""

    def started(self) -> None:
        """Signal ready: the supervisor starts the next child only after this."""

    def heartbeat(self, step: str | None = None) -> None:
        """Prove the work loop is alive; call from the event loop's thread."""


CoroutineFactory = Callable[[ChildContext], Awaitable[None]]


@dataclass(frozen=True)
class CoroutineTarget:
    """A coroutine started as ``factory(context)`` on each (re)start."""

    factory: CoroutineFactory


@dataclass(frozen=True)
class ProcessTarget:
    """A subprocess in its own session (process group).

    With ``notify`` set, the child gets a pipe whose descriptor number is in
    the ``WATCHKEEPER_NOTIFY_FD`` environment variable; it writes lines
    ``READY=1`` (ready) and ``WATCHDOG=1`` (heartbeat), as with sd_notify.
    """

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    notify: bool = False


@dataclass(frozen=True)
class SupervisorTarget:
    """A nested supervisor, built afresh from its spec on each (re)start."""

    spec: SupervisorSpec


Target = Union[CoroutineTarget, ProcessTarget, SupervisorTarget]  # noqa: UP007


@dataclass(frozen=True)
class ChildSpec:
    """How one child is started, restarted and stopped.

    ``wait_ready``: the supervisor waits for the child's ready signal (at most
    ``start_timeout_s``) before it starts the next child. ``heartbeat_timeout_s``:
    a child that goes longer without a heartbeat is treated as hung and
    restarted. ``shutdown_timeout_s``: grace period between SIGTERM (or task
    cancellation) and SIGKILL (or abandoning the task).
    """

    name: str
    target: Target
    restart: Restart = Restart.PERMANENT
    shutdown_timeout_s: float = 5.0
    start_timeout_s: float = 10.0
    wait_ready: bool = False
    heartbeat_timeout_s: float | None = None
    title: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigurationError(f"child name {self.name!r} must be non-empty and have no '/'")
        if self.shutdown_timeout_s < 0 or self.start_timeout_s <= 0:
            raise ConfigurationError(
                f"child {self.name!r}: shutdown_timeout_s must be >= 0, start_timeout_s > 0"
            )
        if self.heartbeat_timeout_s is not None and self.heartbeat_timeout_s <= 0:
            raise ConfigurationError(f"child {self.name!r}: heartbeat_timeout_s must be > 0")
        if isinstance(self.target, ProcessTarget) and not self.target.argv:
            raise ConfigurationError(f"child {self.name!r}: argv must not be empty")


class ChildOptions(TypedDict, total=False):
    """How a child restarts and is waited for; :class:`ChildSpec` documents each."""

    restart: Restart
    shutdown_timeout_s: float
    start_timeout_s: float
    wait_ready: bool
    heartbeat_timeout_s: float | None
    title: str | None


def coroutine_child(
    name: str, factory: CoroutineFactory, **options: Unpack[ChildOptions]
) -> ChildSpec:
    """Spec for a coroutine child: ``factory(context)`` is awaited on each start."""
    return ChildSpec(name, CoroutineTarget(factory), **options)


def process_child(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    notify: bool = False,
    **options: Unpack[ChildOptions],
) -> ChildSpec:
    """Spec for a subprocess child; ``wait_ready`` and heartbeats need ``notify=True``."""
    signals = options.get("wait_ready") or options.get("heartbeat_timeout_s") is not None
    if signals and not notify:
        raise ConfigurationError(
            f"child {name!r}: wait_ready and heartbeat_timeout_s need notify=True "
            "so the process has a pipe to signal on"
        )
    target = ProcessTarget(tuple(argv), dict(env) if env is not None else None, cwd, notify)
    return ChildSpec(name, target, **options)


def supervisor_child(
    spec: SupervisorSpec,
    *,
    restart: Restart = Restart.PERMANENT,
    shutdown_timeout_s: float = 60.0,
    start_timeout_s: float = 60.0,
) -> ChildSpec:
    """Spec for a nested supervisor; it is ready once all its children are."""
    return ChildSpec(
        spec.name,
        SupervisorTarget(spec),
        restart=restart,
        shutdown_timeout_s=shutdown_timeout_s,
        start_timeout_s=start_timeout_s,
        wait_ready=True,
    )


@dataclass(frozen=True)
class SupervisorSpec:
    """A supervisor's fixed shape: its children, strategy and restart policy."""

    name: str
    children: tuple[ChildSpec, ...]
    strategy: Strategy = Strategy.ONE_FOR_ONE
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    dynamic: bool = False
    heartbeat_event_interval_s: float = 1.0
    event_queue_size: int = 1000
