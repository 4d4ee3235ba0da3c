"""Bearer tokens with roles: admins act, reporters report work, viewers read.

A task token (minted with a queue lease) is refused by every role check with
a 403 that says so; only :data:`reporter_or_task` admits it, and the route
must then hold it to its own task with :func:`own_task_only`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from watchkeeper.access.tokens import Role, TaskToken, TokenInfo
from watchkeeper.server.deps import services

_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer wk_...`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}

#: What a request without a token is told.
NO_BEARER_ADVICE = (
    "missing bearer token (no Authorization header was sent): set WATCHKEEPER_TOKEN or the "
    "command line's --token, or send the header yourself as the word Bearer, a space and the "
    "token; `watchkeeper serve` printed the first admin token when it first started, and "
    "on the server's host `watchkeeper token create --role ROLE --store DATA_FOLDER` makes "
    "another"
)


async def _token(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> TokenInfo | TaskToken:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            401,
            # Worded so redaction, which hides the word after a flag like --token, leaves
            # the advice whole: the flag is followed by a comma, never by a word.
            NO_BEARER_ADVICE,
            headers=_CHALLENGE,
        )
    tokens = services(request).tokens
    # The checks run on the event loop: a token the cache answers for costs no thread hop.
    # Only a miss (and every task token, never cached) asks the database, off the loop.
    hit, kept = tokens.cached(credentials.credentials)
    token: TokenInfo | TaskToken | None = kept
    if not hit:
        token = await run_in_threadpool(tokens.check, credentials.credentials)
    if token is None:
        raise HTTPException(401, "unknown or revoked token", headers=_CHALLENGE)
    return token


def require(role: Role) -> Callable[..., Awaitable[TokenInfo]]:
    """A dependency that admits tokens whose role includes ``role``."""

    async def check(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
    ) -> TokenInfo:
        token = await _token(request, credentials)
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


async def _reporter_or_task(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),
) -> TokenInfo | TaskToken:
    token = await _token(request, credentials)
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
