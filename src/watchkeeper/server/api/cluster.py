"""``/api/v1/replicas``: the replicas sharing this server's database, and which one leads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import viewer

router = APIRouter(tags=["system"], responses=ERRORS)


@router.get("/api/v1/replicas", dependencies=[Depends(viewer)])
def get_replicas(request: Request) -> dict[str, Any]:
    """Each replica (alive or gone but not yet forgotten), the leader and its lease epoch."""
    return services(request).cluster.replicas()
