"""What a route or a page may reach: the services, never the store or the runtime.

The app's runtime is set on ``app.state.services`` by :func:`create_app`; this
protocol names the parts of it a request handler uses, so a handler that
reached past the services into the store would not type-check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from fastapi import Request

if TYPE_CHECKING:
    from watchkeeper.clock import Now
    from watchkeeper.config import Settings
    from watchkeeper.decide.decider import Decider
    from watchkeeper.procs.engine import ProcEngine
    from watchkeeper.queue.service import QueueService
    from watchkeeper.timeline.service import TimelineService
    from watchkeeper.watch.overview import Overview
    from watchkeeper.watch.sweeper import Sweeper


class Services(Protocol):
    """The services one watchkeeper process serves requests with."""

    @property
    def settings(self) -> Settings:
        """The loaded configuration."""

    @property
    def clock(self) -> Now:
        """The time every service reads."""

    @property
    def sweeper(self) -> Sweeper:
        """The sweep loop: wake it when a deadline moves."""

    @property
    def decider(self) -> Decider:
        """Decides presses on incidents."""

    @property
    def procs(self) -> ProcEngine:
        """The processes this host started."""

    @property
    def queue(self) -> QueueService:
        """Jobs, tasks, leases and runners."""

    @property
    def timeline(self) -> TimelineService:
        """Run events, spend and signed records."""

    @property
    def push_kinds(self) -> set[str]:
        """Kinds that accept reports over the API."""

    async def overview(self, include_finished: bool) -> Overview:
        """Read every kind now and sort what it reports."""


def services(request: Request) -> Services:
    """The services of the app serving ``request``."""
    found: Services = request.app.state.services
    return found
