"""The async ``with`` shape of the package: breakers, handles and monitors share it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class AsyncScope(ABC):
    """Usable as ``async with``: :meth:`_enter` on the way in, :meth:`_exit` on the way out."""

    async def _enter(self) -> None:  # noqa: B027 - optional: most are already running
        """Whatever must happen before the block runs."""

    @abstractmethod
    async def _exit(self, exc: BaseException | None) -> None:
        """Whatever must happen after the block, given what it raised."""

    async def __aenter__(self) -> Self:
        await self._enter()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._exit(exc)


class StopsOnExit(AsyncScope):
    """An :class:`AsyncScope` that stops when the block ends, however it ends."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop; harmless if already stopped."""

    async def _exit(self, exc: BaseException | None) -> None:
        await self.stop()
