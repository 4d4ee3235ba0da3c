"""What a route or a page may reach: the services, never the store or the runtime.

The app's runtime is set on ``app.state.services`` by :func:`create_app`; this
protocol names the parts of it a request handler uses, so a handler that
reached past the services into the store would not type-check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from fastapi import FastAPI, Request

if TYPE_CHECKING:
    from watchkeeper.access.sessions import SessionService
    from watchkeeper.access.tokens import TokenService
    from watchkeeper.clock import Now
    from watchkeeper.config import Settings
    from watchkeeper.decide.decider import Decider
    from watchkeeper.decide.runbooks import Runbooks
    from watchkeeper.notify.install import InstallView
    from watchkeeper.procs.engine import ProcEngine
    from watchkeeper.programs.host import ProgramHost
    from watchkeeper.queue.service import QueueService
    from watchkeeper.timeline.forge import Forge
    from watchkeeper.timeline.record import RecordKeys
    from watchkeeper.timeline.sentry import Sentry
    from watchkeeper.timeline.service import TimelineService
    from watchkeeper.watch.cluster_view import ClusterView
    from watchkeeper.watch.incidents import IncidentService
    from watchkeeper.watch.overview import Overview
    from watchkeeper.watch.reports import Reports
    from watchkeeper.watch.silences import SilenceService
    from watchkeeper.watch.sweeper import Sweeper

T = TypeVar("T")
# Guards only the making of each app's own lock below.
_LOCKS = threading.Lock()


class Services(Protocol):
    """The services one watchkeeper process serves requests with.

    ``settings`` is the loaded configuration, ``clock`` the time every service
    reads, ``sweeper`` the sweep loop (wake it when a deadline moves);
    ``decider`` decides presses on incidents and ``runbooks`` are the automatic
    first steps; ``incidents`` reads incidents, ``reports`` writes push runs; ``silences``
    silences work and acknowledges incidents;
    ``tokens`` and ``sessions`` are API tokens and dashboard sessions; ``procs``
    the processes this host started; ``programs`` the programs this host's server
    keeps running; ``queue`` jobs, tasks, leases and
    runners; ``timeline`` run events and spend; ``cluster`` the replicas
    sharing the database and who leads them; ``install`` the integrations and
    what the install has done so far; ``record_keys`` the keys records are signed
    with; ``forge`` and ``sentry`` the signed webhooks' handlers.
    """

    # Read-only members: the runtime holds them as fields and cached properties.
    @property
    def settings(self) -> Settings: ...
    @property
    def clock(self) -> Now: ...
    @property
    def sweeper(self) -> Sweeper: ...
    @property
    def decider(self) -> Decider: ...
    @property
    def runbooks(self) -> Runbooks: ...
    @property
    def incidents(self) -> IncidentService: ...
    @property
    def reports(self) -> Reports: ...
    @property
    def silences(self) -> SilenceService: ...
    @property
    def tokens(self) -> TokenService: ...
    @property
    def sessions(self) -> SessionService: ...
    @property
    def procs(self) -> ProcEngine: ...
    @property
    def programs(self) -> ProgramHost: ...
    @property
    def queue(self) -> QueueService: ...
    @property
    def timeline(self) -> TimelineService: ...
    @property
    def cluster(self) -> ClusterView: ...
    @property
    def install(self) -> InstallView: ...
    @property
    def record_keys(self) -> RecordKeys: ...
    @property
    def forge(self) -> Forge: ...
    @property
    def sentry(self) -> Sentry: ...

    @property
    def push_kinds(self) -> set[str]:
        """Kinds that accept reports over the API."""

    async def overview(self, include_finished: bool) -> Overview:
        """Read every kind now and sort what it reports."""

    async def overview_of_run(self, kind: str, run_id: str) -> Overview:
        """The runs list narrowed to one run, read from that run alone."""


def services(request: Request) -> Services:
    """The services of the app serving ``request``."""
    found: Services = request.app.state.services
    return found


def made_once(app: FastAPI, name: str, kind: type[T], make: Callable[[], T]) -> T:
    """``app.state.<name>``, made by ``make`` on its first use (once, whichever thread asks)."""
    found = getattr(app.state, name, None)
    if isinstance(found, kind):
        return found
    with _making_lock(app):
        found = getattr(app.state, name, None)
        if not isinstance(found, kind):
            found = make()
            setattr(app.state, name, found)
    return found


def _making_lock(app: FastAPI) -> threading.RLock:
    """The lock ``app``'s objects are made under: one per app, so one app slow to make an
    object never holds up another in the same process. Reentrant: what one app-wide object
    is made from may itself be made on first use."""
    lock = getattr(app.state, "made_once_lock", None)
    if lock is None:
        with _LOCKS:
            lock = getattr(app.state, "made_once_lock", None)
            if lock is None:
                lock = threading.RLock()
                app.state.made_once_lock = lock
    return lock
