"""The integrations page: each chat platform, webhook and forge, set up or not, and how it fares."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from watchkeeper.notify.install import Integration
from watchkeeper.server.deps import services
from watchkeeper.server.web.common import page
from watchkeeper.server.web.pane import config_path
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session

router = APIRouter(include_in_schema=False)


def _posts(item: Integration) -> dict[str, Any] | None:
    posts = item.posts
    if posts is None:
        return None
    return {
        "total": posts.posted + posts.failed + posts.maybe,
        "posted": posts.posted,
        "failed": posts.failed,
        "maybe": posts.maybe,
        "last_at": posts.last_at,
        "failure_at": posts.failure_at,
        "failure": posts.failure,
    }


def _card(item: Integration) -> dict[str, Any]:
    channel, forge, failure = item.channel, item.forge, item.last_failure
    return {
        "name": item.name,
        "label": item.label,
        "configured": item.configured,
        "setup": item.setup,
        "hint": item.hint,
        "sent": channel.sent if channel else 0,
        "failed": channel.failed if channel else 0,
        "pending": channel.pending if channel else 0,
        "last_at": channel.last_at if channel else None,
        "last_status": channel.last_status.replace("_", " ")
        if channel and channel.last_status
        else None,
        "failure_at": failure[0] if failure else None,
        "failure": (failure[1] or "no reason recorded") if failure else None,
        "webhooks": forge.received if forge else 0,
        "webhook_at": forge.last_at if forge else None,
        "forge": item.name in ("github", "linear", "sentry"),
        "posts": _posts(item),
    }


@router.get("/web/integrations", response_class=HTMLResponse)
async def integrations_page(
    request: Request, current: Session = Depends(page_session)
) -> HTMLResponse:
    """The chat platforms, the webhook, GitHub (with its result posts), Linear and Sentry:
    configured, last delivery, failures."""
    items = await asyncio.to_thread(services(request).install.integrations)
    return page(
        request,
        "integrations.html",
        current,
        integrations=[_card(i) for i in items],
        where=config_path(request),
        **await chrome(request),
        title="Integrations",
    )
