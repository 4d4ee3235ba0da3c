"""Everything one watchkeeper process holds, built from the configuration in one place.

The composition root: each service gets the pieces it uses (the store, the
adapters, a part of the settings, the clock), never the runtime itself, and
only the entry points (``server/``, ``cli/``) import this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from watchkeeper.clock import Clock, utcnow
from watchkeeper.config import Settings
from watchkeeper.decide.decider import Decider
from watchkeeper.decide.diagnose import Diagnoser
from watchkeeper.decide.journal import recover_interrupted
from watchkeeper.decide.runbooks import Runbooks
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.notify.service import Notifier
from watchkeeper.store import Store
from watchkeeper.watch.overview import Overview
from watchkeeper.watch.selfcheck import NoticeSink
from watchkeeper.watch.supervisor import Supervisor


@dataclass
class Runtime:
    """The store, the adapters and the supervisor of one process."""

    settings: Settings
    store: Store
    supervisor: Supervisor
    clock: Clock
    #: The chat channels operator notices use: the server's, while it serves.
    ops_channels: dict[str, Channel] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        clock: Clock = utcnow,
        store: Store | None = None,
        notifier: NoticeSink | None = None,
    ) -> Runtime:
        """Open the store (migrating it) and build every configured kind's adapter."""
        store = store or Store(settings.resolved_database_url)
        adapters = registry.build(settings, AdapterContext(settings, store))
        ops_channels: dict[str, Channel] = {}
        supervisor = Supervisor(
            store,
            adapters,
            check_interval_s=settings.check_interval_s,
            down_after_s=settings.down_after_s,
            notifier=notifier or OpsNotifier(settings.ops, channels=ops_channels),
            clock=clock,
        )
        runtime = cls(settings, store, supervisor, clock, ops_channels)
        runtime.start_decisions()
        from watchkeeper.procs.service import ProcEngine  # lazy: keeps CLI start-up fast

        procs = ProcEngine.from_settings(settings, store, clock)
        procs.reconcile_startup()  # hooks left firing become maybe_fired, never refired
        supervisor.sweep_hooks.append(procs.sweep)
        from watchkeeper.queue.service import QueueService  # lazy, as above

        supervisor.sweep_hooks.append(QueueService(store, settings, clock=clock).sweep)
        return runtime

    def start_decisions(self) -> None:
        """Reconcile the action journal after a crash and switch runbooks into the loop."""
        recover_interrupted(self.store, self.clock())
        self.supervisor.after_sweep.append(self.runbooks.after_sweep)

    @cached_property
    def decider(self) -> Decider:
        """Decides incidents for every channel."""
        adapters = self.supervisor.adapters
        diagnoser = Diagnoser(adapters, self.settings.diagnose, self.clock)
        return Decider(self.store, adapters, self.settings.admins, self.clock, diagnoser)

    @cached_property
    def runbooks(self) -> Runbooks:
        """Automatic first steps."""
        return Runbooks(self.decider, self.store, self.settings.runbooks, self.clock)

    def build_notifier(self, channels: Mapping[str, Channel]) -> Notifier:
        """A notifier routing this process's incident events to ``channels``."""
        return Notifier(
            self.store,
            channels,
            decider=self.decider,
            ops=self.settings.ops,
            kinds=self.settings.kind_configs(),
            clock=self.clock,
        )

    def share_channels(self, channels: Mapping[str, Channel]) -> None:
        """Operator notices go through ``channels`` from now on (the server's, while it serves)."""
        self.ops_channels.clear()
        self.ops_channels.update(channels)

    @property
    def push_kinds(self) -> set[str]:
        """Kinds that accept reports over the API."""
        return registry.push_kinds(self.settings)

    async def overview(self, include_finished: bool) -> Overview:
        """Read every kind now and sort what it reports (does not touch incidents)."""
        return await self.supervisor.overview(include_finished)

    def close(self) -> None:
        """Release adapters and pooled connections."""
        self.supervisor.close()
        self.store.close()
