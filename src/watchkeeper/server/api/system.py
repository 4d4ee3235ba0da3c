"""Health, metrics, making tokens, the schema revision and the test card."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from watchkeeper.clock import rfc3339
from watchkeeper.notify.testcard import places_for, post_test_cards
from watchkeeper.server.api.fields import Line
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.api.schemas import CreateToken
from watchkeeper.server.deps import services
from watchkeeper.server.health import assess
from watchkeeper.server.http.auth import admin, viewer

router = APIRouter(tags=["system"])


@router.get("/healthz")
async def healthz(request: Request) -> JSONResponse:
    """200 ``ok`` or ``degraded``; 503 ``failing`` while this server judges nothing.

    ``causes`` names each check that is not ok, worst first: ``cluster`` (no live
    leader, or the lease cannot be read), ``sweep`` (this leader's sweeps fail or
    are overdue), ``loops`` (a supervised loop stopped, gave up or waits to restart),
    ``store`` (the store refuses writes) and ``paging`` (a paging channel's breaker is
    open). docs/supervision.md says which makes the server degraded and which failing.
    """
    found = services(request)
    cluster = await asyncio.to_thread(found.cluster.health)
    report = assess(found, cluster, getattr(request.app.state, "supervision", None))
    health = found.sweeper.health
    latest = found.sweeper.latest
    body: dict[str, Any] = {
        "status": report.status.value,
        "causes": [cause.as_dict() for cause in report.causes],
        "supervision": {
            "working": health.working,
            "last_ok_at": rfc3339(health.last_ok_at),
            "failing_since": rfc3339(health.failing_since),
            "error": health.last_error,
        },
        "cluster": cluster.as_dict(),
        "unreadable_kinds": []
        if latest is None
        else [{"kind": r.kind, "error": r.error} for r in latest.reads if not r.readable],
    }
    if report.causes:
        body["error"] = "; ".join(cause.detail for cause in report.causes)
    return JSONResponse(body, status_code=report.code, headers={"Cache-Control": "no-store"})


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus exposition: runs by kind and verdict, sweep duration, unreadable kinds."""
    registry = services(request).sweeper.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/api/v1/tokens", status_code=201, dependencies=[Depends(admin)], responses=ERRORS)
def create_token(body: CreateToken, request: Request) -> dict[str, Any]:
    """Create a token; its secret is shown in this answer only."""
    info, secret = services(request).tokens.create(body.role, body.name)
    return {"id": info.id, "name": info.name, "role": info.role.value, "token": secret}


class SchemaOut(BaseModel):
    """``GET /api/v1/schema``: what ``watchkeeper db current --server`` prints."""

    database: str | None = Field(description="the database's revision; null when it is empty")
    code: str | None = Field(description="the newest revision this server's code ships")


@router.get(
    "/api/v1/schema", response_model=SchemaOut, dependencies=[Depends(viewer)], responses=ERRORS
)
def schema(request: Request) -> SchemaOut:
    """The schema revision of the server's database and the one its code expects."""
    database, code = services(request).cluster.schema_revisions()
    return SchemaOut(database=database, code=code)


class TestCardIn(BaseModel):
    """``POST /api/v1/test-card``: where to post; none means every ``[ops] channels`` chat."""

    model_config = ConfigDict(extra="forbid")

    chats: list[Annotated[str, Line(200)]] = Field(
        default=[], max_length=50, description="PLATFORM:CHAT[/THREAD] each"
    )


class CardOut(BaseModel):
    """How the card went to one chat (``chat`` is empty when there was nowhere to post)."""

    chat: str
    state: Literal["ok", "fail"]
    detail: str
    hint: str = Field(description="how to fix it, when it failed")


class TestCardOut(BaseModel):
    """Whether every card was posted, and how each went."""

    ok: bool
    cards: list[CardOut]


@router.post(
    "/api/v1/test-card",
    response_model=TestCardOut,
    dependencies=[Depends(admin)],
    responses=ERRORS,
)
async def test_card(body: TestCardIn, request: Request) -> TestCardOut:
    """Post the test card through this server's own platforms, as its cards go out."""
    settings = services(request).settings
    places = places_for(settings.ops.channels, body.chats)
    channels = request.app.state.channels
    found = await post_test_cards(channels, places)
    cards = [CardOut(chat=c.chat, state=c.state, detail=c.detail, hint=c.hint) for c in found]
    return TestCardOut(ok=all(c.state == "ok" for c in cards), cards=cards)
