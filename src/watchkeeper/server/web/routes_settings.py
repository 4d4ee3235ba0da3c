"""The settings page: runbooks, silences, admins, tokens and budgets, each said where it is set.

What the configuration file sets is shown read-only, naming the file. Tokens
are listed by id, name and role, never by secret; an admin makes one (its
secret shown once, on the page that answers the form) and revokes one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.access.tokens import Role
from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.api.fields import INT32_MAX
from watchkeeper.server.deps import Services, services
from watchkeeper.server.web.common import Verbatim, acting_form, answer, page
from watchkeeper.server.web.pane import config_path, duration
from watchkeeper.server.web.routes_home import chrome, page_session, switches_context
from watchkeeper.server.web.session import Session, session

router = APIRouter(include_in_schema=False)


SETTINGS = "/web/settings"
PLATFORMS = (("slack", "Slack"), ("telegram", "Telegram"), ("discord", "Discord"))


def _budgets(found: Services, where: str) -> list[dict[str, Any]]:
    settings = found.settings
    rows = []
    for name, kind in sorted(settings.kind_configs().items()):
        filed = name in settings.kinds
        rows.append(
            {
                "kind": name,
                "budget": duration(settings.budget_for(name)),
                "expected": duration(kind.expected_s),
                "adapter": kind.adapter,
                "reports": ", ".join(kind.reports),
                "source": f"set in {where}" if filed else "built-in default",
            }
        )
    return rows


def _context(request: Request) -> dict[str, Any]:
    found = services(request)
    where = config_path(request)
    settings = found.settings
    active = found.silences.list(active=True, limit=1000)
    return {
        "where": where,
        "switches": switches_context(found),
        "silences_active": len(active),
        "admins": [
            {"platform": label, "ids": getattr(settings.admins, name)} for name, label in PLATFORMS
        ],
        "tokens": found.tokens.list(),
        "roles": [role.value for role in Role],
        "budgets": _budgets(found, where),
    }


async def _render(request: Request, current: Session, **extra: Any) -> HTMLResponse:
    context = await asyncio.to_thread(_context, request)
    return page(
        request,
        "settings.html",
        current,
        **context,
        **extra,
        **await chrome(request),
        title="Settings",
    )


@router.get(SETTINGS, response_class=HTMLResponse)
async def settings_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """Runbooks, silences, admins, tokens and budgets per kind."""
    return await _render(request, current)


@router.post(SETTINGS + "/tokens")
async def make_token(request: Request, current: Session = Depends(page_session)) -> Response:
    """Make an API token (admins only); its secret is shown once, on the page that answers."""
    form = await acting_form(request, current)
    if not current.is_admin:
        return answer(request, SETTINGS, f"only admins make tokens: @{current.name} is not", False)
    name = form.get("name", "").strip()
    if not name or len(name) > 200:
        return answer(
            request,
            SETTINGS,
            "name the token (1 to 200 characters), so it can be recognised and revoked later",
            False,
        )
    try:
        info, secret = await asyncio.to_thread(
            services(request).tokens.create, form.get("role", ""), name
        )
    except WatchkeeperError as exc:
        return answer(request, SETTINGS, str(exc), False)
    return await _render(request, current, made={"info": info, "secret": Verbatim(secret)})


@router.post(SETTINGS + "/tokens/{token_id}/revoke")
async def revoke_token(
    request: Request,
    token_id: int = Path(ge=1, le=INT32_MAX),
    current: Session = Depends(session),
) -> Response:
    """Revoke a token (admins only): every request with it is refused from now on."""
    await acting_form(request, current)
    if not current.is_admin:
        return answer(
            request, SETTINGS, f"only admins revoke tokens: @{current.name} is not", False
        )
    tokens = services(request).tokens
    known = {info.id: info for info in await asyncio.to_thread(tokens.list)}
    if token_id not in known:
        return answer(request, SETTINGS, f"no token {token_id}", False)
    await asyncio.to_thread(tokens.revoke, token_id)
    return answer(request, SETTINGS, f"token {token_id} ({known[token_id].name}) revoked", True)
