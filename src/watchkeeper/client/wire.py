"""The SDK's side of the HTTP API without its HTTP library: where the server is, what an
answer means, and one call over the standard library's :mod:`http.client`.

:class:`watchkeeper.Client` sends through httpx; importing httpx is about a third of
the command line's start-up, and ``watchkeeper runs`` or a ``report progress`` in a
shell loop send one request. The command line's fast path sends that one request with
:func:`plain_call` instead, and both read the answer with :func:`answer_of`, so a
result or an error is the same object either way. :func:`plain_call_serves` says when
the standard library does exactly what httpx would: plain ``http://`` with no proxy
named in the environment (httpx honours those, and TLS needs its certificate bundle).
"""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from watchkeeper.client.busy import Busy, retry_after
from watchkeeper.errors import ClientError

DEFAULT_URL = "http://127.0.0.1:8750"
URL_ENV = "WATCHKEEPER_URL"
TOKEN_ENV = "WATCHKEEPER_TOKEN"  # noqa: S105 - the variable's name, not a secret
#: Where runs are reported and read.
RUNS_PATH = "/api/v1/runs"
#: Seconds a call may take unless the caller says otherwise.
TIMEOUT_S = 10.0
#: The variables through which httpx (and curl, and urllib) find a proxy.
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def segment(value: object) -> str:
    """``value`` as one segment of a URL's path: a ``/``, ``?``, ``#`` or ``..`` in an id
    names that id, never another route."""
    text = quote(str(value), safe="")
    # A bare "." or ".." would be resolved away by the HTTP client, like a folder's.
    return text.replace(".", "%2E") if text in {".", ".."} else text


def move_path(kind: str, run_id: str, verb: str) -> str:
    """The path of a report (``progress``, ``heartbeat``, ``finish`` ...) on one run."""
    return f"{RUNS_PATH}/{segment(kind)}/{segment(run_id)}/{verb}"


def answer_of(status: int, content: bytes, reason: str, retry_after_header: str | None) -> Any:
    """The JSON of a successful answer (``None`` when it has no body); an error answer
    raises :class:`ClientError` with the server's code and message (:class:`Busy` for 429)."""
    if 200 <= status < 300:
        return json.loads(content) if content else None
    field = None
    try:
        error = json.loads(content)["error"]
        code, message = str(error["code"]), str(error["message"])
        field = error.get("field") if isinstance(error.get("field"), str) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message = "http_error", content.decode("utf-8", "replace")[:500] or reason
    if status == 429:
        raise Busy(code, message, retry_after(retry_after_header))
    raise ClientError(status, code, message, field)


def unreachable(url: str, exc: BaseException) -> ClientError:
    """The error of a call that got no answer from ``url``."""
    return ClientError(0, "unreachable", f"cannot reach watchkeeper at {url}: {exc}")


def plain_call_serves(url: str) -> bool:
    """Whether :func:`plain_call` reaches ``url`` as the SDK's client would."""
    if not url.startswith("http://") or "@" in urlsplit(url).netloc:
        return False
    named = {name.lower() for name, value in os.environ.items() if value}
    return named.isdisjoint(_PROXY_VARIABLES)


def plain_call(
    url: str,
    token: str | None,
    method: str,
    path: str,
    *,
    body: dict[str, Any] | None = None,
    query: dict[str, str] | None = None,
    timeout: float = TIMEOUT_S,
) -> Any:
    """Call the API at ``url`` (``http://`` only) as :meth:`watchkeeper.Client.request` does:
    the answer's JSON, or the same :class:`ClientError` for an error answer or none."""
    import http.client

    where = urlsplit(url)
    target = where.path.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    payload = None
    if body is not None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        headers["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(where.netloc, timeout=timeout)
    try:
        connection.request(method, target, body=payload, headers=headers)
        response = connection.getresponse()
        content = response.read()
    except (OSError, http.client.HTTPException) as exc:
        raise unreachable(url, exc) from exc
    finally:
        connection.close()
    return answer_of(response.status, content, response.reason, response.getheader("retry-after"))
