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
    """200 while supervision runs somewhere; 503 when this replica should not get traffic.

    A follower sweeps nothing, so it is healthy while the database answers and
    some replica holds a live lease (or lost it less than a lease ago: a
    failover). The leader is unhealthy while its own sweeps keep failing.
    """
    found = services(request)
    health = found.sweeper.health
    latest = found.sweeper.latest
    cluster = found.cluster.health()
    body: dict[str, Any] = {
        "status": "ok" if cluster.problem is None else "unhealthy",
        "supervision": {
            "working": health.working,
            "last_ok_at": rfc3339(health.last_ok_at),
            "failing_since": rfc3339(health.failing_since),
            "error": health.last_error,
        },
        "cluster": cluster.json(),
        "unreadable_kinds": []
        if latest is None
        else [{"kind": r.kind, "error": r.error} for r in latest.reads if not r.readable],
    }
    if cluster.problem is not None:
        body["error"] = cluster.problem
    return JSONResponse(body, status_code=200 if cluster.problem is None else 503)


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
