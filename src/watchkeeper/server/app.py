"""The ASGI app: JSON API, health and metrics, with the supervisor loop in the same process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from watchkeeper import __version__
from watchkeeper.runtime import Runtime
from watchkeeper.server import errors
from watchkeeper.server.auth import TokenCache
from watchkeeper.server.limits import BodyLimit
from watchkeeper.server.reports import Reports
from watchkeeper.server.routes_decide import router as decide_router
from watchkeeper.server.routes_incidents import router as incidents_router
from watchkeeper.server.routes_procs import router as procs_router
from watchkeeper.server.routes_runs import router as runs_router
from watchkeeper.server.routes_system import router as system_router
from watchkeeper.server.routes_telegram import router as telegram_router

log = logging.getLogger(__name__)


def create_app(runtime: Runtime, *, run_supervisor: bool = True) -> FastAPI:
    """Build the app around ``runtime``; the supervisor loop runs while the app is served."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        stop = asyncio.Event()
        task = None
        if run_supervisor:
            task = asyncio.create_task(runtime.supervisor.run(stop), name="supervisor")
        try:
            yield
        finally:
            stop.set()
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=10)

    app = FastAPI(
        title="watchkeeper",
        version=__version__,
        description="Supervises long-running work by its progress.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.reports = Reports(runtime)
    app.state.token_cache = TokenCache()
    errors.install(app)
    app.include_router(procs_router)
    app.include_router(runs_router)
    app.include_router(incidents_router)
    app.include_router(decide_router)
    app.include_router(system_router)
    app.include_router(telegram_router)
    app.add_middleware(BodyLimit)
    return app
