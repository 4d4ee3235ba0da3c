"""The models page: the models in use per provider, their prices and where each comes from."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.deps import services
from watchkeeper.server.web.common import acting_form, answer, page
from watchkeeper.server.web.pane import config_path, per_mtok
from watchkeeper.server.web.routes_home import chrome, page_session
from watchkeeper.server.web.session import Session, session
from watchkeeper.timeline.models import ModelPrice, parse_prices

router = APIRouter(include_in_schema=False)
MODELS = "/web/models"
NO_PROVIDER = "(no provider reported)"
SOURCES = {
    "config": "set in the configuration file",
    "override": "override",
    "built-in": "built-in price table",
    None: "unpriced",
}


def _row(item: ModelPrice, where: str) -> dict[str, Any]:
    quote = item.quote
    source = SOURCES.get(quote.source, str(quote.source))
    why = ""
    if quote.source == "config":
        source = f"set in {where}"
        why = (
            f'[prices."{item.provider}/{item.model}"] there wins over an override: change it there'
        )
    override = item.override
    return {
        "provider": item.provider,
        "model": item.model,
        "calls": item.calls,
        "unpriced": item.unpriced,
        "last_at": item.last_at,
        "input": per_mtok(quote.input_per_mtok),
        "output": per_mtok(quote.output_per_mtok),
        "source": source,
        "source_key": quote.source or "unpriced",
        "why": why or quote.note,
        "settable": item.provider is not None and quote.source != "config",
        "override_by": None if override is None else override.set_by,
        "override_at": None if override is None else override.set_at,
        "override_input": "" if override is None else f"{override.input_per_mtok:g}",
        "override_output": "" if override is None else f"{override.output_per_mtok:g}",
    }


def grouped(items: Sequence[ModelPrice], where: str) -> list[dict[str, Any]]:
    """Models per provider, providers by name (the one without a provider last)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        groups.setdefault(item.provider or NO_PROVIDER, []).append(_row(item, where))
    names = sorted(groups, key=lambda name: (name == NO_PROVIDER, name))
    return [{"provider": name, "models": groups[name]} for name in names]


@router.get(MODELS, response_class=HTMLResponse)
async def models_page(request: Request, current: Session = Depends(page_session)) -> HTMLResponse:
    """The priced models in use, per provider, with a form to set an override (admins)."""
    items = await asyncio.to_thread(services(request).timeline.model_prices)
    return page(
        request,
        "models.html",
        current,
        providers=grouped(items, config_path(request)),
        **await chrome(request),
        title="Models",
    )


@router.post(MODELS + "/price")
async def set_price(request: Request, current: Session = Depends(session)) -> Response:
    """Set or clear an override price for one provider's model (admins only)."""
    form = await acting_form(request, current)
    if not current.is_admin:
        return answer(request, MODELS, f"only admins set prices: @{current.name} is not", False)
    provider, model = form.get("provider", ""), form.get("model", "")
    timeline = services(request).timeline
    try:
        if form.get("action") == "clear":
            cleared = await asyncio.to_thread(timeline.clear_price, provider, model)
            said = "override cleared" if cleared else "there was no override to clear"
            return answer(request, MODELS, f"{provider}/{model}: {said}", cleared)
        prices = parse_prices(form)
        await asyncio.to_thread(timeline.set_price, provider, model, prices, f"@{current.name}")
    except WatchkeeperError as exc:
        return answer(request, MODELS, f"{provider}/{model}: {exc}", False)
    return answer(
        request,
        MODELS,
        f"{provider}/{model}: new calls are priced at "
        f"{per_mtok(prices.input_per_mtok)} in and {per_mtok(prices.output_per_mtok)} out "
        "per million tokens",
        True,
    )
