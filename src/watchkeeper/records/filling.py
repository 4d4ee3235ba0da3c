"""A frozen record filled from a row's columns, whichever driver read the row."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from watchkeeper.clock import from_epoch

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    R = TypeVar("R", bound=DataclassInstance)
else:
    R = TypeVar("R")


def record_from_mapping(
    record: type[R], row: Mapping[Any, Any], *, times: Collection[str] = (), **given: Any
) -> R:
    """``record`` filled from the columns of the same names.

    Fields named in ``times`` are epoch columns and become aware times;
    ``given`` fills the rest: enums, renamed columns, values the row does not hold.
    """
    values = {name: row[name] for name in _field_names(record) if name not in given}
    for name in times:
        values[name] = from_epoch(row[name])
    return record(**values, **given)


@functools.cache
def _field_names(record: type[Any]) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(record))
