"""The ASGI app: JSON API, health and metrics, with the sweep loop in the same process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.routing import BaseRoute

from watchkeeper import __version__
from watchkeeper.clock import from_epoch
from watchkeeper.errors import StoreError
from watchkeeper.notify.channels.registry import build_channels
from watchkeeper.notify.service import Notifier
from watchkeeper.queue.reconcile import mark_interrupted
from watchkeeper.runtime import Runtime
from watchkeeper.server.api import docs as api_docs
from watchkeeper.server.api import mcp as routes_mcp
from watchkeeper.server.api.cluster import router as cluster_router
from watchkeeper.server.api.decide import router as decide_router
from watchkeeper.server.api.events import router as events_router
from watchkeeper.server.api.events import wake_streams
from watchkeeper.server.api.incidents import router as incidents_router
from watchkeeper.server.api.lease import LeaseRoute
from watchkeeper.server.api.models import router as models_router
from watchkeeper.server.api.procs import router as procs_router
from watchkeeper.server.api.programs import router as programs_router
from watchkeeper.server.api.progress import ProgressRoute
from watchkeeper.server.api.queue import lease
from watchkeeper.server.api.queue import router as queue_router
from watchkeeper.server.api.runs import progress
from watchkeeper.server.api.runs import router as runs_router
from watchkeeper.server.api.silences import router as silences_router
from watchkeeper.server.api.system import router as system_router
from watchkeeper.server.api.timeline import router as timeline_router
from watchkeeper.server.api.tokens import router as tokens_router
from watchkeeper.server.deps import Services
from watchkeeper.server.early.asgi import EarlyFastAPI
from watchkeeper.server.http import errors
from watchkeeper.server.http.limits import BodyLimit
from watchkeeper.server.http.routers import include
from watchkeeper.server.routes_supervision import router as supervision_router
from watchkeeper.server.supervision import ServerSupervision
from watchkeeper.server.web import install as install_dashboard
from watchkeeper.server.webhooks.discord import router as discord_router
from watchkeeper.server.webhooks.forge import router as forge_router
from watchkeeper.server.webhooks.slack import router as slack_router
from watchkeeper.server.webhooks.telegram import router as telegram_router
from watchkeeper.watch.reports import Reports

log = logging.getLogger(__name__)

#: The API's routers in the order the OpenAPI document lists them (the process routes first).
ROUTERS = (
    procs_router,
    queue_router,
    timeline_router,
    models_router,
    events_router,
    runs_router,
    incidents_router,
    silences_router,
    decide_router,
    system_router,
    supervision_router,
    programs_router,
    tokens_router,
    cluster_router,
    telegram_router,
    discord_router,
    slack_router,
    forge_router,
)


def reports_for(runtime: Runtime) -> Reports:
    """The write side of push runs, wired to ``runtime``'s store, settings, loop and clock."""
    return runtime.reports


def _reports_matched_first(app: FastAPI, included: dict[int, list[BaseRoute]]) -> None:
    """Match the report routes (most of the traffic), then the presses, before the others;
    document them in order.

    A request is matched against the routes one by one. Ordinary progress reports
    and runners' ordinary leases are taken first by their own routes
    (:class:`ProgressRoute`, which leaves the process kind's path alone, and
    :class:`LeaseRoute`; each passes any other request on); then the process
    routes, since one of them (``/api/v1/runs/process/{run_id}/progress``) would
    otherwise be taken by ``/api/v1/runs/{kind}/{run_id}/progress``; then the other
    report routes; then the decision routes, since a burst of presses on one card is
    when matching costs most (each route tried costs FastAPI's scope bookkeeping). The
    OpenAPI document keeps the order the routers were included in.
    """
    documented = list(app.router.routes)
    first = [
        *included[id(procs_router)],
        *included[id(runs_router)],
        *included[id(decide_router)],
    ]
    rest = (route for route in documented if route not in first)
    app.router.routes[:] = [ProgressRoute(progress), LeaseRoute(lease), *first, *rest]

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=documented,
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(
    runtime: Runtime,
    *,
    run_sweeper: bool = True,
    notifier: Notifier | None = None,
    run_notifier: bool | None = None,
    on_start: Callable[[], Awaitable[None]] | None = None,
) -> FastAPI:
    """Build the app around ``runtime``.

    While the app is served, the sweep loop and the notifier (routing
    incident events into the outbox and delivering it) run in its event loop.
    """
    notifier = notifier or runtime.build_notifier(build_channels(runtime.settings))
    deliver = run_sweeper if run_notifier is None else run_notifier

    leadership = runtime.leadership
    # Started in this order, stopped in reverse: the lease is given up last.
    loops = (
        [
            ("leader-lease", leadership.run, "holds or follows the leader lease"),
            ("sweeper", runtime.sweeper.run, "sweeps the runs and judges them"),
        ]
        if run_sweeper
        else []
    )
    if deliver:
        loops.append(("notifier", notifier.run, "routes incident events and delivers messages"))
    supervision = ServerSupervision(runtime, loops, notifier.channels if deliver else None)
    notifier.deliverer.breakers.update(supervision.channel_breakers())

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if run_sweeper:
            # Know who leads before the loops start, so a lone replica sweeps at once.
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(leadership.tick)
        await asyncio.to_thread(
            mark_interrupted, runtime.store, runtime.clock(), runtime.queue.policy
        )
        runtime.share_channels(notifier.channels)
        if deliver:
            await asyncio.to_thread(notifier.recover, runtime.clock())
            runtime.sweeper.after_sweep.append(notifier.poke)
        await supervision.start()
        # Another replica's incident event or queued message wakes this one's notifier and
        # streams at once; the notifier's one-second pass stays the fallback.
        listener = runtime.listener
        if deliver:
            listener.add(notifier.poke)
        listener.add(lambda: wake_streams(app))
        # A follower's report relays its run's deadline: the leader sweeps for it in time.
        listener.add_deadline(lambda at: runtime.sweeper.wake_for(from_epoch(at)))
        listener.start()
        if on_start is not None:
            await on_start()
        try:
            yield
        finally:
            await supervision.stop()
            await asyncio.to_thread(listener.stop)
            runtime.share_channels({})
            await notifier.aclose()

    # Ordinary reports and leases (most of the traffic) are answered ahead of the middleware.
    app = EarlyFastAPI(
        title="watchkeeper",
        version=__version__,
        description="Supervises long-running work by its progress.",
        lifespan=lifespan,
        # Served by api_docs from the package instead: FastAPI's pages load from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    services: Services = runtime  # the routes see the runtime only through its services
    app.state.services = services
    app.state.notifier = notifier
    app.state.channels = notifier.channels
    app.state.supervision = supervision
    app.state.breakers = supervision.breakers
    app.state.health_monitor = supervision.monitor
    errors.install(app)
    included: dict[int, list[BaseRoute]] = {  # by id(): routers are not hashable
        id(router): include(app, router) for router in ROUTERS
    }
    routes_mcp.install(app)
    install_dashboard(app)
    api_docs.install(app)
    _reports_matched_first(app, included)
    app.add_middleware(BodyLimit)
    return app
