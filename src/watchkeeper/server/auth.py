"""Bearer tokens with roles: admins act, reporters report work, viewers read."""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from watchkeeper.store.tokens import Role, TokenInfo, TokenStore, hash_token

#: How long a checked token is trusted without asking the database again. A token revoked
#: from another process stops working within this time.
TOKEN_CACHE_S = 5.0


class TokenCache:
    """Recently checked tokens, by hash: saves a database read on every report."""

    def __init__(self, ttl_s: float = TOKEN_CACHE_S) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[TokenInfo | None, float]] = {}

    def authenticate(self, store: TokenStore, secret: str) -> TokenInfo | None:
        """The token for ``secret``, from the cache while it is fresh."""
        digest = hash_token(secret)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        found = store.authenticate(secret)
        if len(self._entries) > 10_000:
            self._entries.clear()  # forged tokens must not grow the cache without bound
        self._entries[digest] = (found, now + self.ttl_s)
        return found

    def forget(self) -> None:
        """Drop every entry (after a revocation in this process)."""
        self._entries.clear()


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
        cache: TokenCache = request.app.state.token_cache
        token = cache.authenticate(request.app.state.runtime.store.tokens, credentials.credentials)
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
