"""``POST /webhooks/github``, ``/webhooks/linear`` and ``/webhooks/sentry``: signed webhooks.

No bearer token: each request is signed by the forge with the secret in
``[forge]``. An unsigned, forged or stale request answers 401 and changes
nothing; an endpoint whose secret is not configured answers 404. See
:mod:`watchkeeper.timeline.forge` for what each delivery does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from watchkeeper.server.deps import services
from watchkeeper.timeline.forge import Refused

router = APIRouter(tags=["webhooks"])


def _handler_of(request: Request, source: str) -> Callable[[dict[str, str], bytes], Any]:
    served = services(request)
    if source == "sentry":
        return served.sentry.handle
    handler: Callable[[dict[str, str], bytes], Any] = getattr(served.forge, source)
    return handler


async def _handle(request: Request, source: str) -> dict[str, Any]:
    body = await request.body()
    headers = {name.lower(): value for name, value in request.headers.items()}
    # Off the event loop: the first delivery has the runtime make the handler (keys from disk).
    handler = await run_in_threadpool(_handler_of, request, source)
    try:
        answer = await run_in_threadpool(handler, headers, body)
    except Refused as exc:  # the same words serve every forge: say which one refused
        raise Refused(f"{source} webhook refused: {exc}") from None
    result: dict[str, Any] = answer.as_dict()
    return result


@router.post("/webhooks/github", response_model=None)
async def github(request: Request) -> dict[str, Any]:
    """A GitHub delivery: merged pull requests naming a job link to its record."""
    return await _handle(request, "github")


@router.post("/webhooks/linear", response_model=None)
async def linear(request: Request) -> dict[str, Any]:
    """A Linear delivery: issues labelled for watchkeeper or in progress become jobs."""
    return await _handle(request, "linear")


@router.post("/webhooks/sentry", response_model=None)
async def sentry(request: Request) -> dict[str, Any]:
    """A Sentry delivery: an alert or a new issue becomes a job; a regression reopens it."""
    return await _handle(request, "sentry")
