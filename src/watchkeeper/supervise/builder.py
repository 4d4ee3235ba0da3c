"""Composing a supervision tree: ``SupervisorBuilder`` -> frozen ``SupervisorSpec``."""

from __future__ import annotations

from dataclasses import replace

from watchkeeper.supervise.backoff import Backoff
from watchkeeper.supervise.clock import Clock
from watchkeeper.supervise.errors import ConfigurationError
from watchkeeper.supervise.policy import RestartPolicy
from watchkeeper.supervise.spec import ChildSpec, SupervisorSpec
from watchkeeper.supervise.strategies import Strategy
from watchkeeper.supervise.supervisor import Supervisor

__all__ = ["SupervisorBuilder", "SupervisorSpec"]


class SupervisorBuilder:
    """Fluent composition of a supervisor; ``build()`` freezes it.

    Example::

        sup = (
            SupervisorBuilder("workers")
            .strategy(Strategy.ONE_FOR_ONE)
            .intensity(max_restarts=3, period_s=5)
            .backoff(Backoff(initial=0.1, factor=2, cap=10, jitter=1.0))
            .child(process_child("sleeper", ["sleep", "3600"]))
            .build()
        )
        handle = await sup.start()
    """

    def __init__(self, name: str) -> None:
        if not name or "/" in name:
            raise ConfigurationError(f"supervisor name {name!r} must be non-empty and have no '/'")
        self._spec = SupervisorSpec(name=name, children=())

    def child(self, spec: ChildSpec) -> SupervisorBuilder:
        """Add a child; children start in the order they are added."""
        if any(c.name == spec.name for c in self._spec.children):
            raise ConfigurationError(
                f"supervisor {self._spec.name!r} already has a child named {spec.name!r}"
            )
        self._spec = replace(self._spec, children=(*self._spec.children, spec))
        return self

    def strategy(self, strategy: Strategy) -> SupervisorBuilder:
        """Which siblings restart together (default one-for-one)."""
        self._spec = replace(self._spec, strategy=Strategy(strategy))
        return self

    def intensity(self, max_restarts: int, period_s: float) -> SupervisorBuilder:
        """Give up after more than ``max_restarts`` restarts within ``period_s``."""
        policy = replace(self._spec.policy, max_restarts=max_restarts, period_s=period_s)
        self._spec = replace(self._spec, policy=policy)
        return self

    def backoff(self, backoff: Backoff, stable_s: float | None = None) -> SupervisorBuilder:
        """Delay before each restart; ``stable_s`` of uptime resets the attempt count."""
        policy = replace(self._spec.policy, backoff=backoff)
        if stable_s is not None:
            policy = replace(policy, stable_s=stable_s)
        self._spec = replace(self._spec, policy=policy)
        return self

    def policy(self, policy: RestartPolicy) -> SupervisorBuilder:
        """Replace the whole restart policy."""
        self._spec = replace(self._spec, policy=policy)
        return self

    def start_in_background(self, background: bool = True) -> SupervisorBuilder:
        """``start()`` returns at once; the children start one by one in the supervisor, and
        one that fails to start (or is held) is handled by the policy like any exit instead
        of failing ``start()``."""
        self._spec = replace(self._spec, background_start=background)
        return self

    def dynamic(self, dynamic: bool = True) -> SupervisorBuilder:
        """Allow ``add_child`` on the running supervisor."""
        self._spec = replace(self._spec, dynamic=dynamic)
        return self

    def events(
        self, queue_size: int = 1000, heartbeat_interval_s: float = 1.0
    ) -> SupervisorBuilder:
        """Default subscriber queue size and the rate limit of heartbeat events."""
        self._spec = replace(
            self._spec, event_queue_size=queue_size, heartbeat_event_interval_s=heartbeat_interval_s
        )
        return self

    def spec(self) -> SupervisorSpec:
        """The frozen spec, e.g. to nest with ``supervisor_child(builder.spec())``."""
        return self._spec

    def build(self, clock: Clock | None = None) -> Supervisor:
        """A new :class:`Supervisor` for this spec (not yet started)."""
        return Supervisor(self._spec, clock=clock)
