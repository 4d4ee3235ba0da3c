"""The async ``with`` shape that handles and monitors share: enter starts, exit stops."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class StopsOnExit(ABC):
    """Usable as ``async with``: :meth:`_enter` on the way in, :meth:`stop` on the way out."""

    async def _enter(self) -> None:  # noqa: B027 - optional: most are already running
        """Whatever must happen before the block runs."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop; harmless if already stopped."""

    async def __aenter__(self) -> Self:
        await self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
