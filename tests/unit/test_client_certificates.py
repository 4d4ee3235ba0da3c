"""The SDK's client loads certificates only for a server it reaches over TLS.

Loading the system's certificate store is a large part of a short command's
start-up; a plain ``http://`` server (the default, on loopback) never needs it.
"""

from __future__ import annotations

import ssl

import pytest

from watchkeeper.client import Client


@pytest.fixture
def certificate_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every certificate store an SSL context loads while the test runs."""
    loads: list[object] = []
    original = ssl.SSLContext.load_verify_locations

    def recording(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append(args or kwargs)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", recording)
    return loads


def test_a_plain_http_server_loads_no_certificates(certificate_loads: list[object]) -> None:
    with Client("http://127.0.0.1:8750", "wk_x"):
        pass
    assert certificate_loads == []


def test_an_https_server_is_still_verified(certificate_loads: list[object]) -> None:
    with Client("https://watchkeeper.example", "wk_x") as client:
        assert client._http._transport._pool._ssl_context.verify_mode == ssl.CERT_REQUIRED  # type: ignore[attr-defined]
    assert certificate_loads, "an https client must load the certificates it checks against"
