"""Reading pickles an engine stored, without running or importing anything they name.

arq stores its jobs and results as pickles. Loading one with :mod:`pickle` would import and
call whatever it names: a read-only supervisor must not. :func:`peek` loads the plain parts
(dicts, lists, strings, numbers) and turns every class the pickle names into a
:class:`Named` placeholder that only remembers its name and the arguments it was built with,
so a stored exception still reads ``ValueError: cannot parse x``.
"""

from __future__ import annotations

import io
import pickle
from typing import Any


class Named:
    """Something the pickle named but watchkeeper did not import: its name and arguments."""

    def __init__(self, module: str, name: str, args: tuple[Any, ...] = ()) -> None:
        self.module = module
        self.name = name
        self.args = args

    # Instance state and items are not needed to name a thing: take them, keep nothing.
    def __setstate__(self, state: Any) -> None:
        del state

    def __setitem__(self, key: Any, value: Any) -> None:
        del key, value

    def append(self, value: Any) -> None:
        """Take an item pickle adds (a list subclass's), keep nothing."""
        del value

    def extend(self, values: Any) -> None:
        """Take items pickle adds, keep nothing."""
        del values

    def __str__(self) -> str:
        words = " ".join(str(arg) for arg in self.args)
        return f"{self.name}: {words}" if words else self.name


class _Maker:
    """What ``find_class`` returns: calling it (pickle's REDUCE) makes a :class:`Named`."""

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __call__(self, *args: Any, **_kwargs: Any) -> Named:
        return Named(self.module, self.name, args)

    def __reduce__(self) -> tuple[Any, ...]:  # pragma: no cover - never pickled again
        raise TypeError("placeholders are not pickled")


class _Peeker(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _Maker(module, name)


def peek(raw: bytes) -> Any:
    """``raw`` unpickled, every class it names a placeholder; ``None`` when unreadable."""
    try:
        return _Peeker(io.BytesIO(raw)).load()
    except Exception:  # noqa: BLE001 - an unreadable value is shown as unknown, never fatal
        return None
