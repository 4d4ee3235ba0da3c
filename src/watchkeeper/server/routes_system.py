"""Health, metrics and tokens."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from watchkeeper.clock import rfc3339
from watchkeeper.server.auth import admin
from watchkeeper.server.deps import services
from watchkeeper.server.routes_runs import ERRORS
from watchkeeper.server.schemas import CreateToken

router = APIRouter(tags=["system"])


@router.get("/healthz")
def healthz(request: Request) -> JSONResponse:
    """200 while sweeps succeed, 503 while they keep failing."""
    sweeper = services(request).sweeper
    health = sweeper.health
    latest = sweeper.latest
    body: dict[str, Any] = {
        "status": "ok" if health.working else "unhealthy",
        "supervision": {
            "working": health.working,
            "last_ok_at": rfc3339(health.last_ok_at),
            "failing_since": rfc3339(health.failing_since),
            "error": health.last_error,
        },
        "unreadable_kinds": []
        if latest is None
        else [{"kind": r.kind, "error": r.error} for r in latest.reads if not r.readable],
    }
    return JSONResponse(body, status_code=200 if health.working else 503)


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
