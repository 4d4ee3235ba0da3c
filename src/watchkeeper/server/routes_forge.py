"""``POST /webhooks/github``, ``/webhooks/linear`` and ``/webhooks/sentry``: signed webhooks.

No bearer token: each request is signed by the forge with the secret in
``[forge]``. An unsigned, forged or stale request answers 401 and changes
nothing; an endpoint whose secret is not configured answers 404. See
:mod:`watchkeeper.timeline.forge` for what each delivery does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from watchkeeper.server.deps import made_once, services
from watchkeeper.server.routes_timeline import record_key
from watchkeeper.timeline.forge import Forge, Refused, Submit
from watchkeeper.timeline.sentry import Sentry

if TYPE_CHECKING:
    from watchkeeper.queue.service import QueueService

router = APIRouter(tags=["webhooks"])


def _submitter(queue: QueueService, org: str, fleet: str, source: str) -> Submit:
    """The queue's own submit, bound to where ``source``'s jobs go: ``(title, payload) -> id``."""

    def submit(title: str, payload: dict[str, Any]) -> str:
        job = queue.submit(title, org=org, fleet=fleet, payload=payload, submitted_by=source)
        return job.id

    return submit


def forge_of(request: Request) -> Forge:
    """The app's forge handler, built on first use."""
    served = services(request)
    config = served.settings.forge
    submit = _submitter(served.queue, config.linear_org, config.linear_fleet, "linear")

    def make() -> Forge:
        return served.timeline.forge(config, record_key(request), submit)

    return made_once(request.app, "forge", Forge, make)


def sentry_of(request: Request) -> Sentry:
    """The app's Sentry triage, built on first use."""
    served = services(request)
    config = served.settings.forge
    queue = served.queue

    def resume(job_id: str, payload: dict[str, Any]) -> str:
        return queue.resume(job_id, payload).id

    def make() -> Sentry:
        submit = _submitter(queue, config.sentry_org, config.sentry_fleet, "sentry")
        store, clock = served.timeline.store, served.timeline.clock
        return Sentry(store, config, submit=submit, resume=resume, clock=clock)

    return made_once(request.app, "sentry", Sentry, make)


async def _handle(request: Request, source: str) -> dict[str, Any]:
    body = await request.body()
    headers = {name.lower(): value for name, value in request.headers.items()}
    handler = (
        sentry_of(request).handle if source == "sentry" else getattr(forge_of(request), source)
    )
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
