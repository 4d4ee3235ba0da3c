"""What every dashboard page shares: templates, forms, answers to acting posts."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from watchkeeper.redact import redact
from watchkeeper.server.web import jobsview, tasks
from watchkeeper.server.web.session import Session, check_csrf

HERE = Path(__file__).parent
#: Acting forms are small: anything bigger is not ours.
MAX_FORM_BYTES = 16 * 1024


def _ago(value: str | datetime | None) -> str:
    """``12 s ago``, ``3 min ago``, ``2 h ago``, ``4 d ago``."""
    if value is None:
        return "never"
    at = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value
    seconds = max(0.0, (datetime.now(UTC) - at).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{math.floor(seconds / size)} {unit} ago"
    return f"{math.floor(seconds)} s ago"


def _time(value: str | None) -> str:
    """``2026-01-05 12:00:03 UTC`` from RFC 3339."""
    if not value:
        return ""
    at = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def _money(value: float | None) -> str:
    if value is None:
        return "unpriced"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


def _tokens(value: int | None) -> str:
    if not value:
        return "0"
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value / size:.1f}{unit}"
    return str(value)


templates = Jinja2Templates(directory=str(HERE / "templates"))


class Verbatim:
    """A value of the server's own, printed as it is: a session's CSRF token, a login
    form's nonce, a new API token's secret shown once to the admin who made it.

    Pages redact every other value they print (it may come from the supervised work). A
    random token of ours can take a credential's shape (about 1 CSRF token in 28,000 did),
    and printed masked it is useless: every post of that session was refused. Such a value
    is printed as character references, which the browser reads back as the value and no
    redaction shape matches: a macro's output is redacted again where it is called, so
    printing it plainly here would not be enough.
    """

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def __html__(self) -> str:
        if redact(self._text) == self._text:
            return str(escape(self._text))
        return "".join(f"&#{ord(character)};" for character in self._text)

    def __str__(self) -> str:
        return self._text


def _printed(value: Any) -> Any:
    """Every value a page prints passes through redact: titles, reasons and logs come from
    the supervised work and may carry a credential it printed."""
    if isinstance(value, Markup):
        # It was trusted HTML already; the mask holds no markup, so it stays safe.
        return Markup(redact(str(value)))  # noqa: S704
    if isinstance(value, str):
        return redact(value)
    return value


templates.env.finalize = _printed
templates.env.filters.update(ago=_ago, when=_time, money=_money, tokens=_tokens, verbatim=Verbatim)
templates.env.globals.update(
    task_icon=tasks.icon,
    job_actions=jobsview.actions,
    task_label=tasks.label,
    task_interrupted=tasks.interrupted,
    INTERRUPTED_LABEL=tasks.INTERRUPTED_LABEL,
    tojson=lambda value: json.dumps(value, separators=(",", ":")),
    pretty=lambda value: json.dumps(value, indent=2),
)


def page(request: Request, name: str, current: Session | None, **context: Any) -> HTMLResponse:
    """Render ``name`` with the session (for the CSRF token and the admin's buttons)."""
    context.setdefault("notice", request.query_params.get("notice"))
    return templates.TemplateResponse(
        request, name, {"session": current, "path": request.url.path, **context}
    )


async def form_of(request: Request) -> dict[str, str]:
    """A url-encoded form body (acting forms are small, and need no multipart parser)."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


async def acting_form(request: Request, current: Session) -> dict[str, str]:
    """The form of a POST that acts, after its CSRF token is checked."""
    form = await form_of(request)
    check_csrf(request, current, form)
    return form


def wants_json(request: Request) -> bool:
    """The page's script asked (it shows the answer in place); a plain form gets a redirect."""
    return "application/json" in request.headers.get("accept", "")


def answer(request: Request, back: str, message: str, ok: bool, **extra: Any) -> Response:
    """The answer to an acting post: JSON for the page's script, else back with a notice."""
    if wants_json(request):
        return JSONResponse({"ok": ok, "message": message, **extra}, status_code=200)
    separator = "&" if "?" in back else "?"
    return RedirectResponse(f"{back}{separator}{urlencode({'notice': message})}", 303)


def local_path(value: str | None, default: str) -> str:
    """A redirect target on this site only (never another host)."""
    if value and value.startswith("/web") and not value.startswith("//"):
        return value
    return default
