"""Everything one watchkeeper process holds, built from the configuration in one place.

The composition root: each service gets the pieces it uses (the store, the
adapters, a part of the settings, the clock), never the runtime itself, and
only the entry points (``server/``, ``cli/``) import this module.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from watchkeeper import __version__
from watchkeeper.access.sessions import SessionService
from watchkeeper.access.tokens import TokenService
from watchkeeper.clock import Now, to_epoch, utcnow
from watchkeeper.config import Settings
from watchkeeper.decide.decider import Decider
from watchkeeper.decide.diagnose import Diagnoser
from watchkeeper.decide.journal import recover_abandoned, recover_interrupted
from watchkeeper.decide.runbooks import Runbooks
from watchkeeper.kinds import registry
from watchkeeper.kinds.base import AdapterContext
from watchkeeper.kinds.program import ProgramAdapter
from watchkeeper.notify.channels.base import Channel
from watchkeeper.notify.install import InstallView
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.notify.service import Notifier
from watchkeeper.store import Store
from watchkeeper.store.listen import Listener, announce_deadline
from watchkeeper.watch.cluster_view import ClusterView
from watchkeeper.watch.incidents import IncidentService
from watchkeeper.watch.leader import Leadership
from watchkeeper.watch.overview import Overview
from watchkeeper.watch.reports import Reports
from watchkeeper.watch.selfcheck import NoticeSink
from watchkeeper.watch.silences import SilenceService
from watchkeeper.watch.sweeper import Sweeper

if TYPE_CHECKING:
    from watchkeeper.procs.engine import ProcEngine
    from watchkeeper.programs.host import ProgramHost
    from watchkeeper.queue.service import QueueService
    from watchkeeper.timeline.forge import Forge, Submit
    from watchkeeper.timeline.record import RecordKeys
    from watchkeeper.timeline.sentry import Sentry
    from watchkeeper.timeline.service import TimelineService


@dataclass
class Runtime:
    """The store, the adapters and the sweeper of one process."""

    settings: Settings
    store: Store
    sweeper: Sweeper
    clock: Now
    #: The chat channels operator notices use: the server's, while it serves.
    ops_channels: dict[str, Channel] = field(default_factory=dict)

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        clock: Now = utcnow,
        store: Store | None = None,
        notifier: NoticeSink | None = None,
    ) -> Runtime:
        """Open the store (migrating it) and build every configured kind's adapter."""
        store = store or Store(settings.resolved_database_url)
        adapters = registry.build(settings, AdapterContext(settings, store, clock))
        ops_channels: dict[str, Channel] = {}
        leadership = Leadership(
            store,
            check_interval_s=settings.check_interval_s,
            clock=clock,
            sole=store.is_sqlite,
            version=__version__,
        )
        sweeper = Sweeper(
            store,
            adapters,
            check_interval_s=settings.check_interval_s,
            down_after_s=settings.down_after_s,
            notifier=notifier or OpsNotifier(settings.ops, channels=ops_channels),
            clock=clock,
            leadership=leadership,
        )
        if not store.is_sqlite:
            sweeper.relay_deadline = lambda at: announce_deadline(store.engine, to_epoch(at))
        runtime = cls(settings, store, sweeper, clock, ops_channels)
        for adapter in adapters.values():
            if isinstance(adapter, ProgramAdapter):  # acts through this host's programs
                adapter.control_of = lambda: runtime.programs
        runtime.start_decisions()
        runtime.procs.reconcile_startup()  # hooks left firing become maybe_fired, never refired
        sweeper.local_hooks.append(runtime.procs.sweep)  # each replica reaps its own host's runs
        sweeper.sweep_hooks.append(runtime.queue.sweep)
        # The leader marks actions of replicas that are gone, without waiting for a restart.
        sweeper.sweep_hooks.append(
            functools.partial(
                recover_abandoned, store, within=leadership.live_within, replica=leadership.replica
            )
        )
        return runtime

    def start_decisions(self) -> None:
        """Reconcile the action journal after a crash and switch runbooks into the loop."""
        recover_interrupted(self.store, self.clock())
        self.sweeper.after_sweep.append(self.runbooks.after_sweep)

    @property
    def leadership(self) -> Leadership:
        """This replica's hold on the leader lease (the sweeper's)."""
        assert self.sweeper.leadership is not None
        return self.sweeper.leadership

    @cached_property
    def cluster(self) -> ClusterView:
        """Who leads, which replicas are alive, and whether supervision runs somewhere."""
        return ClusterView(self.store, self.leadership, self.sweeper.health, self.clock)

    @cached_property
    def listener(self) -> Listener:
        """Wakes this process when another one writes an incident event (PostgreSQL only)."""
        return Listener(self.store.engine)

    @cached_property
    def decider(self) -> Decider:
        """Decides incidents for every channel."""
        adapters = self.sweeper.adapters
        diagnoser = Diagnoser(adapters, self.settings.diagnose, self.clock)
        return Decider(
            self.store,
            adapters,
            self.settings.admins,
            self.clock,
            diagnoser,
            replica=self.leadership.replica,
        )

    @cached_property
    def runbooks(self) -> Runbooks:
        """Automatic first steps."""
        return Runbooks(self.decider, self.store, self.settings.runbooks, self.clock)

    @cached_property
    def incidents(self) -> IncidentService:
        """Incidents and their decisions, as the API and the dashboard read them."""
        return IncidentService(self.store, self.clock)

    @cached_property
    def silences(self) -> SilenceService:
        """Silences, and who is looking at which incident."""
        return SilenceService(self.store, self.clock)

    @cached_property
    def reports(self) -> Reports:
        """The write side of push runs; each report wakes the sweep loop for its deadline."""
        return Reports(self.store, self.settings, self.sweeper.poke, self.clock)

    @cached_property
    def tokens(self) -> TokenService:
        """API tokens."""
        return TokenService(self.store, self.clock)

    @cached_property
    def sessions(self) -> SessionService:
        """Dashboard sessions."""
        return SessionService(self.store, self.clock)

    @cached_property
    def procs(self) -> ProcEngine:
        """The processes this host started: start, watch, abort, reap, park."""
        from watchkeeper.procs.engine import ProcEngine  # lazy: keeps CLI start-up fast

        return ProcEngine.from_settings(self.settings, self.store, self.clock)

    @cached_property
    def programs(self) -> ProgramHost:
        """The programs this host's server keeps running (``[programs.NAME]``)."""
        from watchkeeper.programs.host import ProgramHost  # lazy, as above

        return ProgramHost(self.settings, self.store, self.clock, wake=self.sweeper.poke)

    @cached_property
    def queue(self) -> QueueService:
        """Jobs, tasks, leases and runners."""
        from watchkeeper.queue.service import QueueService  # lazy, as above

        return QueueService(self.store, self.settings, clock=self.clock)

    @cached_property
    def install(self) -> InstallView:
        """The integrations as configured and as they fared, and what the install has done."""
        return InstallView(self.store, self.settings)

    @cached_property
    def timeline(self) -> TimelineService:
        """Run events, spend and signed records (with OpenTelemetry export if installed)."""
        from watchkeeper.timeline import otel  # lazy, as above
        from watchkeeper.timeline.service import TimelineService

        exporter = otel.exporter()
        return TimelineService(
            self.store,
            self.settings,
            clock=self.clock,
            exporters=[exporter] if exporter is not None else [],
        )

    @cached_property
    def record_keys(self) -> RecordKeys:
        """The keys this server signs execution records with (read, or made, once)."""
        from watchkeeper.timeline import record

        return record.load_keys(self.settings)

    @cached_property
    def forge(self) -> Forge:
        """The GitHub and Linear webhooks' handler: merges linked into signed records,
        Linear issues submitted as jobs on ``[forge] linear_org`` and ``linear_fleet``."""
        config = self.settings.forge
        submit = _submitter(self.queue, config.linear_org, config.linear_fleet, "linear")
        return self.timeline.forge(config, self.record_keys, submit)

    @cached_property
    def sentry(self) -> Sentry:
        """Sentry's webhook triage: an issue becomes a job on ``[forge] sentry_org`` and
        ``sentry_fleet``; a regression resumes it."""
        config = self.settings.forge
        queue = self.queue
        submit = _submitter(queue, config.sentry_org, config.sentry_fleet, "sentry")
        return self.timeline.sentry(config, submit, lambda job, data: queue.resume(job, data).id)

    def build_notifier(self, channels: Mapping[str, Channel]) -> Notifier:
        """A notifier routing this process's incident events to ``channels``."""
        return Notifier(
            self.store,
            channels,
            decider=self.decider,
            ops=self.settings.ops,
            kinds=self.settings.kind_configs(),
            clock=self.clock,
            leadership=self.leadership,
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
        return await self.sweeper.overview(include_finished)

    async def overview_of_run(self, kind: str, run_id: str) -> Overview:
        """The runs list narrowed to one run, read from that run alone."""
        return await self.sweeper.overview_of_run(kind, run_id)

    def close(self) -> None:
        """Release adapters and pooled connections."""
        if "listener" in self.__dict__:
            self.listener.stop()
        self.sweeper.close()
        self.store.close()


def _submitter(queue: QueueService, org: str, fleet: str, source: str) -> Submit:
    """The queue's own submit, bound to where ``source``'s jobs go: ``(title, payload) -> id``."""

    def submit(title: str, payload: dict[str, Any]) -> str:
        return queue.submit(title, org=org, fleet=fleet, payload=payload, submitted_by=source).id

    return submit


def upgrade_database(settings: Settings) -> tuple[str | None, str | None]:
    """Apply every pending migration; the schema revisions before and after."""
    from watchkeeper.store.engine import make_engine  # lazy: `db` needs no adapters
    from watchkeeper.store.migrate import current_revision, head_revision, upgrade

    engine = make_engine(settings.resolved_database_url)
    try:
        before = current_revision(engine)
        upgrade(engine)
        return before, head_revision()
    finally:
        engine.dispose()


def database_revisions(settings: Settings) -> tuple[str | None, str | None]:
    """The schema revision of the database, and the one this code expects."""
    from watchkeeper.store.engine import make_engine  # lazy, as above
    from watchkeeper.store.migrate import current_revision, head_revision

    engine = make_engine(settings.resolved_database_url)
    try:
        return current_revision(engine), head_revision()
    finally:
        engine.dispose()
