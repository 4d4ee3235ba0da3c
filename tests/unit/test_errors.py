"""One exception root, and every error carries the answer the API gives for it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from fastapi import FastAPI
from fastapi.testclient import TestClient

import watchkeeper
from watchkeeper.errors import InvalidInput, NotFound, ValueRefused, WatchkeeperError
from watchkeeper.server.http.errors import install


def _project_exceptions() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(watchkeeper.__path__, "watchkeeper."):
        if ".migrations." in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                found.append(cls)
    return found


def test_every_project_exception_descends_from_the_one_root() -> None:
    found = _project_exceptions()
    assert len(found) > 20
    strays = [
        f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, WatchkeeperError)
    ]
    assert strays == []
    for cls in found:
        assert isinstance(cls.http_status, int) and 400 <= cls.http_status < 600, cls  # type: ignore[attr-defined]
        assert isinstance(cls.code, str) and cls.code, cls  # type: ignore[attr-defined]


def test_a_value_the_store_refuses_is_the_callers_to_change() -> None:
    assert (ValueRefused.http_status, ValueRefused.code) == (422, "invalid")


class _Teapot(NotFound):
    http_status = 418
    code = "teapot"


def test_the_api_answers_with_what_the_class_declares() -> None:
    app = FastAPI()
    install(app)

    @app.get("/teapot")
    def teapot() -> None:
        raise _Teapot("short and stout")

    @app.get("/invalid")
    def invalid() -> None:
        raise InvalidInput("say less", "body.note")

    @app.get("/plain")
    def plain() -> None:
        raise WatchkeeperError("ours to fix")

    with TestClient(app) as client:
        answer = client.get("/teapot")
        assert answer.status_code == 418
        assert answer.json() == {"error": {"code": "teapot", "message": "short and stout"}}
        answer = client.get("/invalid")
        assert answer.status_code == 422
        assert answer.json()["error"] == {
            "code": "invalid",
            "message": "say less",
            "field": "body.note",
        }
        answer = client.get("/plain")
        assert (answer.status_code, answer.json()["error"]["code"]) == (500, "internal")
