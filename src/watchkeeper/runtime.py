"""Everything one watchkeeper process holds, built from the configuration in one place."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from watchkeeper.clock import Clock, utcnow
from watchkeeper.config import Settings
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.store import Store
from watchkeeper.watch.overview import Overview, build
from watchkeeper.watch.reconcile import judge_reads
from watchkeeper.watch.supervisor import Supervisor

if TYPE_CHECKING:
    from watchkeeper.decide.decider import Decider
    from watchkeeper.decide.runbooks import Runbooks


@dataclass
class Runtime:
    """The store, the adapters and the supervisor of one process."""

    settings: Settings
    store: Store
    supervisor: Supervisor
    clock: Clock

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        clock: Clock = utcnow,
        store: Store | None = None,
        notifier: OpsNotifier | None = None,
    ) -> Runtime:
        """Open the store (migrating it) and build every configured kind's adapter."""
        store = store or Store(settings.resolved_database_url)
        adapters = registry.build(settings, AdapterContext(settings, store))
        supervisor = Supervisor(
            store,
            adapters,
            check_interval_s=settings.check_interval_s,
            down_after_s=settings.down_after_s,
            notifier=notifier or OpsNotifier(settings.ops, settings=settings),
            clock=clock,
        )
        runtime = cls(settings, store, supervisor, clock)
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
        from watchkeeper.decide.journal import recover_interrupted

        recover_interrupted(self.store, self.clock())
        self.supervisor.after_sweep.append(self.runbooks.after_sweep)

    @cached_property
    def decider(self) -> Decider:
        """Decides incidents for every channel."""
        from watchkeeper.decide.decider import Decider

        return Decider(self)

    @cached_property
    def runbooks(self) -> Runbooks:
        """Automatic first steps."""
        from watchkeeper.decide.runbooks import Runbooks

        return Runbooks(self.decider)

    @property
    def push_kinds(self) -> set[str]:
        """Kinds that accept reports over the API."""
        return registry.push_kinds(self.settings)

    async def overview(self, include_finished: bool) -> Overview:
        """Read every kind now and sort what it reports (does not touch incidents)."""
        now = self.clock()
        reads = await self.supervisor.read_all(now)
        judged = judge_reads(reads, self.supervisor.specs, now)
        live = self.store.incidents.live(list(judged))
        suppressed = self.store.decisions.suppressed_keys(list(judged))
        return build(reads, judged, live, now, include_finished, suppressed)

    def close(self) -> None:
        """Release adapters and pooled connections."""
        self.supervisor.close()
        self.store.close()
