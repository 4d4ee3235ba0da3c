"""Errors become JSON with a stable code and a sentence saying what to change."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from watchkeeper.errors import StoredDataUnreadable, WatchkeeperError
from watchkeeper.redact import redact

log = logging.getLogger(__name__)


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The one shape every error answer has; the message is redacted, since it may quote input."""
    body: dict[str, Any] = {"code": code, "message": redact(message)}
    if field is not None:
        body["field"] = field
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _describe(problem: dict[str, Any]) -> tuple[str, str]:
    location = [str(part) for part in problem.get("loc", ()) if part != "body"]
    field = ".".join(location) or "body"
    kind = problem.get("type", "")
    if kind == "json_invalid":
        return (
            "body",
            f"the body is not valid JSON: {problem.get('ctx', {}).get('error', '')}".strip(),
        )
    if kind == "extra_forbidden":
        return field, f"unknown field {field!r}: remove it"
    if kind == "missing":
        return field, f"{field} is required"
    if kind == "string_too_long":
        limit = problem.get("ctx", {}).get("max_length")
        return field, f"{field} is too long: at most {limit} characters"
    message = str(problem.get("msg", "is invalid")).removeprefix("Value error, ")
    return field, f"{field}: {message}"


async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = list(exc.errors())
    if not problems:
        return error_response(422, "invalid", "the request is invalid")
    field, message = _describe(problems[0])
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    status, code = (
        (400, "malformed_json") if problems[0].get("type") == "json_invalid" else (422, "invalid")
    )
    return error_response(status, code, message, field)


async def _domain(_request: Request, exc: Exception) -> JSONResponse:
    """Answer with the status and code the error's class declares."""
    assert isinstance(exc, WatchkeeperError)
    # A stored row that cannot be read is logged by the store, once per row: a page
    # polled every second would repeat it here as often.
    if exc.http_status == 500 and not (isinstance(exc, StoredDataUnreadable) and exc.told):
        log.error("Unhandled watchkeeper error: %s", exc, extra={"action": "api"})
    return error_response(exc.http_status, exc.code, str(exc), exc.field)


_HTTP_CODES = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    429: "too_many_requests",
}


async def _http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    if exc.status_code == 404 and message == "Not Found":
        message = "no such endpoint; see /docs for the API"
    return error_response(exc.status_code, code, message, headers=getattr(exc, "headers", None))


async def _gone(request: Request, _exc: Exception) -> JSONResponse:
    # The client left before its body arrived (a runner killed mid-post, a closed laptop):
    # nothing failed here, and nobody is left to read the answer.
    log.info(
        "A client went away before its request arrived whole: %s %s",
        request.method,
        request.url.path,
        extra={"action": "api"},
    )
    return error_response(400, "client_gone", "the request body did not arrive whole")


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.exception("Unexpected failure answering a request", exc_info=exc, extra={"action": "api"})
    return error_response(500, "internal", "an unexpected error happened; it has been logged")


def install(app: FastAPI) -> None:
    """Register every handler on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(WatchkeeperError, _domain)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(ClientDisconnect, _gone)
    app.add_exception_handler(Exception, _unexpected)
