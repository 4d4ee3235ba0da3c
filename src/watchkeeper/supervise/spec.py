"""Child specs: what a supervisor starts, how it restarts it, how it stops it."""

from __future__ import annotations

import signal
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
    "Hold",
    "Output",
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


#: Called at each launch of a process child: the descriptor its stdout and stderr go to.
Output = Callable[[], int]
#: Asked before each start of a child: why it must wait (it is held), or ``None``.
Hold = Callable[[], str | None]


@dataclass(frozen=True)
class ProcessTarget:
    """A subprocess in its own session (process group).

    With ``notify`` set, the child gets a pipe whose descriptor number is in
    the ``WATCHKEEPER_NOTIFY_FD`` environment variable; it writes lines
    ``READY=1`` (ready) and ``WATCHDOG=1`` (heartbeat), as with sd_notify.

    ``stop_signal`` goes to the whole group when the child is stopped.
    ``ready_after_s``: the child is ready once it has run this long, and an
    exit before that is a failed start (``start_failed``) whatever its status,
    as supervisord's ``startsecs``. ``normal_exit_codes`` are the statuses
    that count as a normal exit (supervisord's ``exitcodes``). ``output`` is
    called at each launch and returns the descriptor the child's stdout and
    stderr are written to; the runner closes its copy once the child has it
    (default: the parent's own).
    """

    argv: Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    notify: bool = False
    stop_signal: int = signal.SIGTERM
    ready_after_s: float | None = None
    normal_exit_codes: frozenset[int] = frozenset({0})
    output: Output | None = field(default=None, compare=False)


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
    cancellation) and SIGKILL (or abandoning the task). ``hold``: asked before
    each restart (and, in a supervisor that starts in the background, before
    the first start); while it gives a reason, the child is held and starts
    once :meth:`Supervisor.release_held` finds it no longer held.
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
    hold: Hold | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigurationError(f"child name {self.name!r} must be non-empty and have no '/'")
        if self.shutdown_timeout_s < 0 or self.start_timeout_s <= 0:
            raise ConfigurationError(
                f"child {self.name!r}: shutdown_timeout_s must be >= 0, start_timeout_s > 0"
            )
        if self.heartbeat_timeout_s is not None and self.heartbeat_timeout_s <= 0:
            raise ConfigurationError(f"child {self.name!r}: heartbeat_timeout_s must be > 0")
        if isinstance(self.target, ProcessTarget):
            self._check_process(self.target)

    def _check_process(self, target: ProcessTarget) -> None:
        if not target.argv:
            raise ConfigurationError(f"child {self.name!r}: argv must not be empty")
        ready_after = target.ready_after_s
        if ready_after is not None and not 0 <= ready_after < self.start_timeout_s:
            raise ConfigurationError(
                f"child {self.name!r}: ready_after_s must be >= 0 and below start_timeout_s "
                f"({self.start_timeout_s:g} s)"
            )


class ChildOptions(TypedDict, total=False):
    """How a child restarts and is waited for; :class:`ChildSpec` documents each."""

    restart: Restart
    shutdown_timeout_s: float
    start_timeout_s: float
    wait_ready: bool
    heartbeat_timeout_s: float | None
    title: str | None
    hold: Hold | None


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
    stop_signal: int = signal.SIGTERM,
    ready_after_s: float | None = None,
    normal_exit_codes: frozenset[int] = frozenset({0}),
    output: Output | None = None,
    **options: Unpack[ChildOptions],
) -> ChildSpec:
    """Spec for a subprocess child (:class:`ProcessTarget` documents its options).

    ``wait_ready`` needs ``notify=True`` (the child says ``READY=1``) or
    ``ready_after_s`` (it is ready once it has run that long); heartbeats need
    ``notify=True``.
    """
    if options.get("wait_ready") and not notify and ready_after_s is None:
        raise ConfigurationError(
            f"child {name!r}: wait_ready needs notify=True, so the process has a pipe to "
            "signal on, or ready_after_s"
        )
    if options.get("heartbeat_timeout_s") is not None and not notify:
        raise ConfigurationError(
            f"child {name!r}: heartbeat_timeout_s needs notify=True "
            "so the process has a pipe to signal on"
        )
    target = ProcessTarget(
        tuple(argv),
        dict(env) if env is not None else None,
        cwd,
        notify,
        stop_signal,
        ready_after_s,
        frozenset(normal_exit_codes),
        output,
    )
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
    #: ``start()`` returns at once; children start one by one in the supervisor's actor,
    #: and a child that fails to start is restarted by the policy like any exit.
    background_start: bool = False
