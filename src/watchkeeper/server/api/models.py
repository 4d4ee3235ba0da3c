"""``/api/v1/models``: the models in use with their prices, and an admin's price overrides.

A price comes from the configuration file (read-only here), an override an admin
set, or the bundled price data. An override prices new timeline events only; a
model the file prices refuses one (409), since the file wins.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from watchkeeper.access.tokens import TokenInfo
from watchkeeper.clock import rfc3339
from watchkeeper.errors import NotFound
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import admin, viewer
from watchkeeper.timeline.models import ModelPrice, parse_prices

router = APIRouter(prefix="/api/v1/models", tags=["timeline"], responses=ERRORS)
_PROVIDER = Path(min_length=1, max_length=100, description="the provider, as events report it")
_MODEL = Path(min_length=1, max_length=200, description="the model (it may contain /)")


class PriceBody(BaseModel):
    """``PUT /api/v1/models/{provider}/{model}``: USD per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(description="USD per million input tokens (0 or more)")
    output_per_mtok: float = Field(description="USD per million output tokens (0 or more)")
    cache_read_per_mtok: float | None = Field(
        None, description="USD per million cached input tokens read (default: the input price)"
    )
    cache_write_per_mtok: float | None = Field(
        None, description="USD per million input tokens written to the cache (default: input)"
    )


def model_json(item: ModelPrice) -> dict[str, Any]:
    """A model as the API (and the page's script) shows it."""
    quote, override = item.quote, item.override
    return {
        "provider": item.provider,
        "model": item.model,
        "calls": item.calls,
        "unpriced_calls": item.unpriced,
        "last_used_at": rfc3339(item.last_at),
        "price": {
            "source": quote.source,
            "input_per_mtok": quote.input_per_mtok,
            "output_per_mtok": quote.output_per_mtok,
            "note": quote.note or None,
        },
        "override": None
        if override is None
        else {
            "input_per_mtok": override.input_per_mtok,
            "output_per_mtok": override.output_per_mtok,
            "cache_read_per_mtok": override.cache_read_per_mtok,
            "cache_write_per_mtok": override.cache_write_per_mtok,
            "set_by": override.set_by,
            "set_at": rfc3339(override.set_at),
        },
    }


def _one(request: Request, provider: str, model: str) -> dict[str, Any]:
    key = (provider.lower(), model.lower())
    for item in services(request).timeline.model_prices():
        if (item.provider, item.model) == key:
            return model_json(item)
    raise NotFound(f"no model {provider}/{model} is in use or priced; see GET /api/v1/models")


@router.get("", dependencies=[Depends(viewer)])
def list_models(request: Request) -> dict[str, Any]:
    """The models used in the last 90 days (most recent first), then those priced but
    unused; each with the price a new call gets and where it comes from: ``config``,
    ``override``, ``built-in``, or ``null`` (unpriced)."""
    return {"models": [model_json(item) for item in services(request).timeline.model_prices()]}


@router.put("/{provider}/{model:path}")
def set_price(
    body: PriceBody,
    request: Request,
    provider: str = _PROVIDER,
    model: str = _MODEL,
    token: TokenInfo = Depends(admin),
) -> dict[str, Any]:
    """Price new calls of ``model`` on ``provider`` (admins only); 409 where the configuration
    file prices it. Events already stored keep their cost."""
    prices = parse_prices(body.model_dump())
    services(request).timeline.set_price(provider, model, prices, f"@{token.name}")
    return _one(request, provider, model)


@router.delete("/{provider}/{model:path}", dependencies=[Depends(admin)])
def clear_price(request: Request, provider: str = _PROVIDER, model: str = _MODEL) -> dict[str, Any]:
    """Remove an admin's price: new calls are priced by the file or the bundled data again."""
    if not services(request).timeline.clear_price(provider, model):
        raise NotFound(f"{provider}/{model} has no override to clear")
    return {"provider": provider.lower(), "model": model.lower(), "cleared_at": _now(request)}


def _now(request: Request) -> str | None:
    moment: datetime = services(request).clock()
    return rfc3339(moment)
