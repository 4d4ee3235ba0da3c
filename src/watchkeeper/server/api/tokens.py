"""``/api/v1/tokens``: list and revoke API tokens (admin), as ``watchkeeper token`` does.

Creating one is ``POST /api/v1/tokens`` (in :mod:`watchkeeper.server.api.system`). No answer
here carries a secret or its hash: a token's secret is shown once, when made.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Path, Request
from pydantic import BaseModel, Field

from watchkeeper.access.tokens import TokenInfo
from watchkeeper.errors import NotFound
from watchkeeper.server.api.runs import ERRORS
from watchkeeper.server.deps import services
from watchkeeper.server.http.auth import admin

router = APIRouter(
    prefix="/api/v1/tokens", tags=["system"], dependencies=[Depends(admin)], responses=ERRORS
)


class TokenOut(BaseModel):
    """A token as listed: who it is for and whether it still works, never its secret."""

    id: int
    name: str
    role: str = Field(description="admin, reporter or viewer")
    created_at: datetime
    revoked_at: datetime | None = Field(description="null while the token works")


class TokensOut(BaseModel):
    """``GET /api/v1/tokens``."""

    tokens: list[TokenOut]


class RevokedOut(BaseModel):
    """``POST /api/v1/tokens/{id}/revoke``."""

    id: int
    revoked_at: datetime
    already_revoked: bool = Field(description="true when an earlier call had revoked it")


def _out(info: TokenInfo) -> TokenOut:
    return TokenOut(
        id=info.id,
        name=info.name,
        role=info.role.value,
        created_at=info.created_at,
        revoked_at=info.revoked_at,
    )


def _find(request: Request, token_id: int) -> TokenInfo:
    for info in services(request).tokens.list():
        if info.id == token_id:
            return info
    raise NotFound(f"no token {token_id}; see `watchkeeper token list`")


@router.get("", response_model=TokensOut)
def list_tokens(request: Request) -> TokensOut:
    """Every operator token, oldest first: id, name, role, when made and when revoked."""
    return TokensOut(tokens=[_out(info) for info in services(request).tokens.list()])


@router.post("/{token_id}/revoke", response_model=RevokedOut)
def revoke_token(
    request: Request, token_id: int = Path(ge=1, le=2**63 - 1, description="the token's id")
) -> RevokedOut:
    """Revoke a token: every request with it is refused from now on. Twice is harmless."""
    before = _find(request, token_id)
    if before.revoked_at is None:
        services(request).tokens.revoke(token_id)
    # Read back rather than take this clock: a concurrent revoke's time is the one stored.
    revoked_at = _find(request, token_id).revoked_at or services(request).clock()
    return RevokedOut(
        id=token_id, revoked_at=revoked_at, already_revoked=before.revoked_at is not None
    )
