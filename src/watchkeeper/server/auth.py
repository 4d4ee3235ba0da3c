"""Bearer tokens with roles: admins act, reporters report work, viewers read."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from watchkeeper.store.tokens import Role, TokenInfo

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer wk_...`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def require(role: Role) -> Callable[..., TokenInfo]:
    """A dependency that admits tokens whose role includes ``role``."""

    def check(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
    ) -> TokenInfo:
        if credentials is None or credentials.scheme.lower() != "bearer":
            raise HTTPException(
                401,
                "missing bearer token: send `Authorization: Bearer <token>` "
                "(create one with `watchkeeper token create`)",
                headers=_CHALLENGE,
            )
        token: TokenInfo | None = request.app.state.runtime.store.tokens.authenticate(
            credentials.credentials
        )
        if token is None:
            raise HTTPException(401, "unknown or revoked token", headers=_CHALLENGE)
        if not token.role.allows(role):
            raise HTTPException(
                403, f"this needs the {role.value} role; token {token.name!r} is {token.role.value}"
            )
        return token

    return check


viewer = require(Role.VIEWER)
reporter = require(Role.REPORTER)
admin = require(Role.ADMIN)
