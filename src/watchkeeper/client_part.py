"""What every part of the SDK (jobs, runners, procs, incidents...) shares: its client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watchkeeper.client import Client


class ApiPart:
    """One part of the API, reached through the client it belongs to."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def _post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """``POST`` ``body`` to ``path``; the JSON object answered."""
        return self._client.request_object("POST", path, json=body)


def present(**fields: Any) -> dict[str, Any]:
    """The fields that were given: an option left out is not sent as ``null``."""
    return {name: value for name, value in fields.items() if value is not None}
