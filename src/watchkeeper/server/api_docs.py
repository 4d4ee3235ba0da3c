"""The interactive API docs at ``/docs``, served with Swagger UI from the package.

FastAPI's own ``/docs`` loads Swagger UI from a CDN, so a server without a way
out showed a blank page. The assets in ``static_docs/`` (Swagger UI's release,
see its README there) ship inside the wheel; nothing is fetched at run time.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = Path(__file__).parent / "static_docs"
ASSETS_URL = "/docs/assets"


def install(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets under ``/docs/assets`` from this package.

    The app must be built with ``docs_url=None`` and ``redoc_url=None``, so the
    CDN-backed pages FastAPI would add are not there.
    """
    openapi_url = app.openapi_url or "/openapi.json"
    title = f"{app.title} API"

    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
            # No badge from the public validator: it is an image fetched from elsewhere.
            swagger_ui_parameters={"validatorUrl": None},
        )

    app.add_api_route("/docs", docs, include_in_schema=False, response_class=HTMLResponse)
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
