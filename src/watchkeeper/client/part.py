"""What every part of the SDK (jobs, runners, procs, incidents...) shares: its client."""

from __future__ import annotations

from typing import Any, Protocol


class Caller(Protocol):
    """What a part asks of the client it belongs to (the client itself, in practice)."""

    #: Seconds each call may take; calls that wait on the server add their wait to it.
    timeout: float

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Call the API; an error answer raises ``ClientError``."""

    def request_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """Call the API for a JSON object."""

    def request_text(self, method: str, path: str, **kwargs: Any) -> str:
        """Call the API for a text answer."""

    def request_when_free(
        self, method: str, path: str, *, deadline: float | None, **kwargs: Any
    ) -> Any:
        """Call the API, asking again while the server says it is busy."""


class ApiPart:
    """One part of the API, reached through the client it belongs to."""

    def __init__(self, client: Caller) -> None:
        self._client = client

    def _post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``POST`` ``body`` to ``path``; the JSON object answered."""
        return self._client.request_object("POST", path, json=body)


def present(**fields: Any) -> dict[str, Any]:
    """The fields that were given: an option left out is not sent as ``null``."""
    return {name: value for name, value in fields.items() if value is not None}
