"""Swagger UI at ``/docs`` renders in a real browser that can reach nothing but the server."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from .conftest import Dashboard


def test_api_docs_render_with_every_outside_request_refused(
    dashboard: Dashboard, pages: Any
) -> None:
    from playwright.sync_api import expect

    page = pages()
    server = urlsplit(dashboard.url).netloc
    refused: list[str] = []

    def only_this_server(route: Any) -> None:
        if urlsplit(route.request.url).netloc == server:
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto(f"{dashboard.url}/docs")
    # Rendered from the schema: the title, and an operation the API really has.
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("watchkeeper")
    expect(page.locator(".swagger-ui .opblock-summary-path").first).to_be_visible()
    expect(page.locator('.swagger-ui [data-path="/healthz"]').first).to_be_visible()
    assert refused == []
