"""A frozen record filled from a row's columns, whichever driver read the row.

A row is checked as it is read: a column holding what its field cannot hold
(a time no calendar has, text in a number column, a NULL where a value must be,
JSON that does not parse or has the wrong shape, a status no enum names) raises
:class:`UnreadableValue`, naming the column and the value, before the record
reaches any reader. Such rows are written by hand or restored from a bad copy;
the store decides whether a reader skips them or refuses (``store/unreadable.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Collection, Mapping
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from watchkeeper.clock import from_epoch
from watchkeeper.errors import StoredDataUnreadable

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    R = TypeVar("R", bound=DataclassInstance)
else:
    R = TypeVar("R")
E = TypeVar("E", bound=Enum)


class UnreadableValue(StoredDataUnreadable, ValueError):
    """A stored value its record's field cannot hold; names the column and the value.

    A ``ValueError`` too, so a listing that leaves out rows it cannot read catches it
    with the driver's own conversion errors."""

    def __init__(self, column: str, value: Any, problem: str) -> None:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else f"{shown[:77]}..."
        super().__init__(f"{column}={shown}: {problem}")
        self.column = column
        self.value = value


class NotJSON:
    """What a JSON column holding text that does not parse reads as (see
    :func:`tolerant_json_loads`): the row is then unreadable, not the whole read."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text)


def tolerant_json_loads(text: str | bytes) -> Any:
    """``json.loads`` for a store's JSON columns: text that does not parse becomes
    :class:`NotJSON`, so one bad row spoils that row alone, not every row read with it."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return NotJSON(text if isinstance(text, str) else text.decode("utf-8", "replace"))


def record_from_mapping(
    record: type[R],
    row: Mapping[Any, Any],
    *,
    times: Collection[str] = (),
    check: bool = False,
    **given: Any,
) -> R:
    """``record`` filled from the columns of the same names.

    Fields named in ``times`` are epoch columns and become aware times (a time no
    calendar holds raises :class:`UnreadableValue`); ``given`` fills the rest: enums,
    renamed columns, values the row does not hold. With ``check``, every value taken
    from the row is checked against its field's type: :class:`UnreadableValue` says
    which column holds what the field cannot.
    """
    values = {name: row[name] for name in _field_names(record) if name not in given}
    for name in times:
        try:
            values[name] = from_epoch(row[name])
        except ValueError as exc:
            raise UnreadableValue(name, row[name], str(exc)) from None
    if check:
        for name, field in _fields_checked(record):
            if name in given:
                continue  # the caller's own value, not the row's
            value = values[name]
            # The usual value is of one of the field's exact types: one set lookup.
            if type(value) not in field.exact or (type(value) is float and not field.finite(value)):
                problem = field.problem(value)
                if problem is not None:
                    raise UnreadableValue(name, value, problem)
    return record(**values, **given)


def enum_of(kind: type[E], row: Mapping[Any, Any], column: str) -> E:
    """The member of ``kind`` the row's ``column`` names, or :class:`UnreadableValue`."""
    value = row[column]
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(str(member.value) for member in kind)
        raise UnreadableValue(column, value, f"not one of {names}") from None


@functools.cache
def _field_names(record: type[Any]) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(record))


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """What a field of a record may hold, read from its type."""

    #: The types a value of it usually has, exactly (the fast check).
    exact: frozenset[type]
    #: Every type it may have, subclasses too (the slow check).
    accepted: tuple[type, ...]
    nullable: bool

    def finite(self, value: float) -> bool:
        """A float field holds a finite number; a float in any other field is refused."""
        return float not in self.accepted or math.isfinite(value)

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this field, or ``None``."""
        if value is None:
            return None if self.nullable else "empty where a value must be"
        if isinstance(value, NotJSON):
            return "not JSON"
        if not isinstance(value, self.accepted):
            return f"a {type(value).__name__} where a {_names(self.accepted)} must be"
        if isinstance(value, float) and not self.finite(value):
            return "not a finite number"
        return None


@functools.cache
def _fields_checked(record: Any) -> tuple[tuple[str, _Field], ...]:
    """Each field whose type says what a column may hold; none for the others."""
    try:
        hints = typing.get_type_hints(record)
    except (NameError, TypeError):  # a hint only a type checker can resolve: no checks
        return ()
    found = []
    for name in _field_names(record):
        nullable, accepted = _accepted(hints.get(name))
        if accepted is not None:
            exact = frozenset(accepted) | ({type(None)} if nullable else set())
            found.append((name, _Field(exact, accepted, nullable)))
    return tuple(found)


def _accepted(hint: Any) -> tuple[bool, tuple[type, ...] | None]:
    """Whether ``hint`` admits ``None``, and the types a value of it may have
    (``None``: any, or a type this check does not know)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        nullable = type(None) in members
        accepted: tuple[type, ...] = ()
        for member in members:
            if member is type(None):
                continue
            _, more = _accepted(member)
            if more is None:
                return nullable, None
            accepted += more
        return nullable, accepted
    return False, _types_of(origin or hint)


def _types_of(kind: Any) -> tuple[type, ...] | None:
    if kind is float:  # a REAL column may read back an integer, a sum a Decimal
        return (float, int, Decimal)
    if kind is bool:
        return (bool, int)
    if isinstance(kind, type) and issubclass(kind, Enum) and issubclass(kind, str):
        return (str,)  # the store names the member; checked by enum_of where it matters
    if kind in (tuple, list):  # a JSON column reads a list for either
        return (tuple, list)
    if kind in (int, str, dict, datetime):
        return (kind,)
    return None


def _names(accepted: tuple[type, ...]) -> str:
    return " or ".join(kind.__name__ for kind in accepted[:2])
