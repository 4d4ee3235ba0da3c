"""Bearer tokens with roles: admins act, reporters report work, viewers read.

A task token (minted with a queue lease, see ``store/tokens.py``) is refused
by every role check with a 403 that says so; only :data:`reporter_or_task`
admits it, and the route must then hold it to its own task with
:func:`own_task_only`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from watchkeeper.store.tokens import Role, TaskToken, TokenInfo, TokenStore, hash_token

#: How long a checked token is trusted without asking the database again. A token revoked
#: from another process stops working within this time.
TOKEN_CACHE_S = 5.0


class TokenCache:
    """Recently checked tokens, by hash: saves a database read on every report.

    Task tokens are never cached: one is removed the moment its task ends,
    and must stop working at once, from any replica.
    """

    def __init__(self, ttl_s: float = TOKEN_CACHE_S) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[TokenInfo | None, float]] = {}

    def authenticate(self, store: TokenStore, secret: str) -> TokenInfo | TaskToken | None:
        """The token for ``secret``, from the cache while it is fresh."""
        digest = hash_token(secret)
        now = time.monotonic()
        cached = self._entries.get(digest)
        if cached is not None and cached[1] > now:
            return cached[0]
        found = store.lookup(secret)
        if isinstance(found, TaskToken):
            return found
        if len(self._entries) > 10_000:
            self._entries.clear()  # forged tokens must not grow the cache without bound
        self._entries[digest] = (found, now + self.ttl_s)
        return found

    def forget(self) -> None:
        """Drop every entry (after a revocation in this process)."""
        self._entries.clear()


_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer wk_...`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _token(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> TokenInfo | TaskToken:
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
    return token


def require(role: Role) -> Callable[..., TokenInfo]:
    """A dependency that admits tokens whose role includes ``role``."""

    def check(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
    ) -> TokenInfo:
        token = _token(request, credentials)
        if isinstance(token, TaskToken):
            raise HTTPException(
                403,
                f"this needs the {role.value} role; the token of task {token.task_id} may only "
                "send timeline events about that task (POST /api/v1/events/batch)",
            )
        if not token.role.allows(role):
            raise HTTPException(
                403, f"this needs the {role.value} role; token {token.name!r} is {token.role.value}"
            )
        return token

    return check


def _reporter_or_task(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
) -> TokenInfo | TaskToken:
    token = _token(request, credentials)
    if isinstance(token, TokenInfo) and not token.role.allows(Role.REPORTER):
        raise HTTPException(
            403, f"this needs the reporter role; token {token.name!r} is {token.role.value}"
        )
    return token


def own_task_only(
    token: TokenInfo | TaskToken, task_id: str | None, job_id: str | None, where: str
) -> None:
    """Refuse (403) a task token speaking about any task or job but its own.

    ``None`` is no claim (the route fills in the token's own ids); ``where``
    names the offending part of the request in the message.
    """
    if not isinstance(token, TaskToken):
        return
    if task_id is not None and task_id != token.task_id:
        raise HTTPException(
            403,
            f"{where}: the token of task {token.task_id} may only report about that task, "
            f"not {task_id!r}; leave task_id out or set it to $WATCHKEEPER_TASK_ID",
        )
    if job_id is not None and job_id != token.job_id:
        raise HTTPException(
            403,
            f"{where}: task {token.task_id} belongs to job {token.job_id}, not {job_id!r}; "
            "leave job_id out or set it to $WATCHKEEPER_JOB_ID",
        )


viewer = require(Role.VIEWER)
reporter = require(Role.REPORTER)
admin = require(Role.ADMIN)
#: Reporters, and task tokens (which the route must hold to their task: :func:`own_task_only`).
reporter_or_task = _reporter_or_task
