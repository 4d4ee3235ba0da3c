"""The interactive API docs at ``/docs`` load everything from the server itself.

A server on a network with no way out (an air-gapped site, a laptop on a train)
must still show its API docs: every script, style sheet and icon the page names
is served from the package, and answers with the type a browser expects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import patient_http
from watchkeeper.notify.ops import OpsNotifier
from watchkeeper.runtime import Runtime
from watchkeeper.store import Store

from ..conftest import make_settings
from ..support.live_server import LiveServer, live_server

#: src="...", href="..." and the spec and redirect URLs Swagger UI is configured with.
ASSET = re.compile(
    r"""(?:src|href)\s*=\s*["']([^"']+)["']"""
    r"""|(?:url|oauth2RedirectUrl)\s*:\s*'([^']+)'"""
)
#: What a browser accepts for each kind of asset (scripts have two registered names).
TYPES = {
    ".js": {"text/javascript", "application/javascript"},
    ".css": {"text/css"},
    ".png": {"image/png"},
    ".json": {"application/json"},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live server on a SQLite file: the docs do not depend on the store."""
    tmp: Path = tmp_path_factory.mktemp("api-docs")
    store = Store(f"sqlite:///{tmp / 'data' / 'watchkeeper.db'}")
    settings = make_settings(tmp, store.url)
    runtime = Runtime.open(settings, store=store, notifier=OpsNotifier(settings.ops))
    with live_server(runtime) as live:
        yield live
    runtime.close()


def _assets(page: str) -> list[str]:
    return [first or second for first, second in ASSET.findall(page)]


def _expected_types(url: str) -> set[str]:
    suffix = Path(url.split("?")[0]).suffix
    assert suffix in TYPES, f"{url}: an asset of a kind this test does not know"
    return TYPES[suffix]


def test_docs_page_names_only_assets_of_this_server(server: LiveServer) -> None:
    page = patient_http.get(server.url + "/docs")
    assert page.status_code == 200
    assert "text/html" in page.headers["content-type"]
    assets = _assets(page.text)
    # The page is useless without its script, its style sheet and the schema it renders.
    assert any(url.endswith("swagger-ui-bundle.js") for url in assets), assets
    assert any(url.endswith("swagger-ui.css") for url in assets), assets
    assert any(url.endswith("openapi.json") for url in assets), assets
    outside = [url for url in assets if not url.startswith("/") or url.startswith("//")]
    assert outside == [], f"/docs loads from elsewhere: {outside}"
    assert "http://" not in page.text and "https://" not in page.text


def test_every_asset_of_the_docs_page_answers_with_its_type(server: LiveServer) -> None:
    page = patient_http.get(server.url + "/docs").text
    for url in _assets(page):
        answer = patient_http.get(server.url + url)
        assert answer.status_code == 200, (url, answer.status_code)
        media_type = answer.headers["content-type"].split(";")[0].strip()
        assert media_type in _expected_types(url), (url, media_type)
        assert answer.content, url


def test_the_docs_script_is_swagger_ui_itself(server: LiveServer) -> None:
    page = patient_http.get(server.url + "/docs").text
    bundle = next(url for url in _assets(page) if url.endswith("swagger-ui-bundle.js"))
    script = patient_http.get(server.url + bundle).text
    # A placeholder or an error page would pass a status check; the real bundle defines this.
    assert "SwaggerUIBundle" in script
    assert len(script) > 500_000


def test_redoc_loads_nothing_from_elsewhere_either(server: LiveServer) -> None:
    page = patient_http.get(server.url + "/redoc")
    # Either not offered at all, or offered from this server alone.
    if page.status_code == 200:
        outside = [u for u in _assets(page.text) if not u.startswith("/") or u.startswith("//")]
        assert outside == []
    else:
        assert page.status_code == 404
