"""Routers added to an app as their routes were declared, each route built once.

FastAPI 0.138 and later keep an included router whole and build every route of it again,
for each app that includes it, the first time a request walks past it: each route's
parameter and response models twice. For the server that was 0.9 s of its start-up, and
a process that builds app after app (the tests) paid it for every app. A route declared on
a router is complete already (its path has the router's prefix; its tags, responses and
dependencies are the router's), so it is served as it was declared.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[Any]]


def include(parent: FastAPI | APIRouter, router: APIRouter) -> list[BaseRoute]:
    """Add ``router``'s routes to ``parent`` after its own, and its lifespan inside
    ``parent``'s; returns the routes added."""
    target = parent.router if isinstance(parent, FastAPI) else parent
    if router.on_startup or router.on_shutdown:
        raise ValueError("a router's start-up and shut-down handlers go in its lifespan")
    added = list(router.routes)
    target.routes.extend(added)
    # As FastAPI's own include does: a router declared without one brings a lifespan that
    # does nothing.
    target.lifespan_context = _nested(target.lifespan_context, router.lifespan_context)
    return added


def _nested(outer: Lifespan, inner: Lifespan) -> Lifespan:
    @contextlib.asynccontextmanager
    async def both(app: Any) -> AsyncIterator[Any]:
        async with outer(app) as outer_state, inner(app) as inner_state:
            if outer_state is None and inner_state is None:
                yield None
            else:
                yield {**(inner_state or {}), **(outer_state or {})}

    return both
