"""The onboarding page: the steps from a new install to its first card, ticked as they happen.

Each step's state is read from the install itself (its tokens, its configuration,
its runs, incidents and deliveries), never remembered by the page.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.access.tokens import Role
from watchkeeper.server.deps import services
from watchkeeper.server.web.common import page
from watchkeeper.server.web.pane import config_path
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session

router = APIRouter(include_in_schema=False)


def _steps(request: Request) -> list[dict[str, Any]]:
    found = services(request)
    counts = found.install.counts()
    admins = [t for t in found.tokens.list() if t.revoked_at is None and t.role is Role.ADMIN]
    server = str(request.base_url).rstrip("/")
    return [
        {
            "key": "token",
            "title": "Make an admin token",
            "done": bool(admins),
            "said": f"{len(admins)} admin token(s) work",
            "how": "The first start prints one; make more with",
            "command": f"watchkeeper token create --role admin --name you --server {server}",
        },
        {
            "key": "chat",
            "title": "Connect a chat",
            "done": found.install.chat_configured(),
            "said": "a chat platform or the webhook is configured",
            "how": f"Write {config_path(request)} for your chat platform "
            "(telegram, discord or slack), check it, and restart the server:",
            "command": "watchkeeper init --platform slack --chat slack:C0123",
        },
        {
            "key": "run",
            "title": "Report a first run",
            "done": counts.runs > 0,
            "said": f"{counts.runs} run(s) reported",
            "how": "Start a command under watchkeeper:",
            "command": f"watchkeeper run --server {server} --name 'first run' --budget 1m "
            "-- sleep 600",
        },
        {
            "key": "job",
            "title": "Run a first job on a runner",
            "done": counts.runners > 0 and counts.tasks_done > 0,
            "said": f"{counts.runners} runner(s) registered, {counts.tasks_done} task(s) run "
            "to the end",
            "how": "Start a runner for a fleet on a host that does the work, then submit a "
            "job to that fleet (an admin token submits):",
            "command": f"watchkeeper runner --fleet first --server {server}\n"
            f"watchkeeper submit --fleet first --org you --title 'first job' --server {server} "
            "-- echo hello",
        },
        {
            "key": "incident",
            "title": "See an incident open",
            "done": counts.incidents > 0,
            "said": f"{counts.incidents} incident(s) opened",
            "how": "A run that makes no progress for its budget opens one; this one stalls "
            "after 10 seconds:",
            "command": f"watchkeeper run --server {server} --name stall --budget 10s -- sleep 120",
        },
        {
            "key": "card",
            "title": "Receive a first card",
            "done": counts.cards_sent > 0,
            "said": f"{counts.cards_sent} card(s) delivered to a chat",
            "how": "An incident's card goes to the ops chats; check that they receive cards with",
            "command": f"watchkeeper test-card --server {server}",
        },
    ]


@router.get("/web/onboarding", response_class=HTMLResponse)
async def onboarding_page(
    request: Request, current: Session = Depends(page_session)
) -> HTMLResponse:
    """A checklist from a new install to its first card, each step read from the install."""
    steps = await asyncio.to_thread(_steps, request)
    upcoming = next((step for step in steps if not step["done"]), None)
    return page(
        request,
        "onboarding.html",
        current,
        steps=steps,
        upcoming=upcoming,
        **await chrome(request),
        title="Getting started",
    )
