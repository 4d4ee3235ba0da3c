"""Regenerate the reference sections of docs/configuration.md and docs/cli.md.

The configuration reference is walked from the pydantic model (``watchkeeper.config``),
the CLI reference from the Typer app itself, so neither can miss a key or a command.
Each lands between its BEGIN/END markers; the prose around them is left alone.

    .venv/bin/python tools/gen_docs.py           # rewrite both pages
    .venv/bin/python tools/gen_docs.py --check   # exit 1 when either is out of date
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
COMMAND = ".venv/bin/python tools/gen_docs.py"

#: The placeholder shown for a table's own name, by the key holding those tables.
_PLACEHOLDERS = {"kinds": "NAME", "orgs": "NAME", "prices": '"PROVIDER/MODEL"'}

#: Keys a model accepts and rewrites before validation, so they are no field of it.
_SHORTHANDS: dict[str, list[tuple[str, str, str, str]]] = {
    "KindConfig": [
        (
            "reports_itself",
            "boolean",
            "`false`",
            '`true` is short for `reports = ["failed", "stuck", "stalled", "looping"]` '
            "(every paged condition); set one of the two",
        )
    ]
}


def _marker(name: str) -> tuple[str, str]:
    begin = f"<!-- BEGIN GENERATED {name}: run `{COMMAND}`; edit the code, not this -->"
    return begin, f"<!-- END GENERATED {name} -->"


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _prose(doc: str | None) -> str:
    """A docstring as Markdown: reStructuredText literals become code, lines are joined."""
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split()).replace("``", "`")


# The configuration reference


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(names)
    if origin is typing.Literal:
        return " or ".join(f'`"{arg}"`' for arg in args)
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "table"
    simple = {int: "integer", float: "number", str: "string", bool: "boolean", Path: "path"}
    if annotation in simple:
        return simple[annotation]
    return getattr(annotation, "__name__", str(annotation))


def _toml(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'.replace("|", "\\|")
    if isinstance(value, list | tuple):
        inner = ", ".join(f'"{item}"' if isinstance(item, str) else repr(item) for item in value)
        return f"`[{inner}]`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        factory = typing.cast(Callable[[], Any], field.default_factory)
        value = factory()
        return "`{}` (none)" if isinstance(value, dict) and not value else _toml(value)
    if field.default is PydanticUndefined:
        return "required"
    return _toml(field.default)


def _bounds(field: FieldInfo) -> str:
    words = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤", "min_length": "length ≥"}
    found = []
    for item in field.metadata:
        for attr, sign in words.items():
            limit = getattr(item, attr, None)
            if limit is not None:
                found.append(f"{sign} {limit}")
    return f" ({', '.join(found)})" if found else ""


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _mapping_of(annotation: Any) -> tuple[Any, type[BaseModel]] | None:
    """``(key type, model)`` when ``annotation`` is a table of tables of one model."""
    if typing.get_origin(annotation) is dict:
        key, value = typing.get_args(annotation)
        model = _model_of(value)
        if model is not None:
            return key, model
    return None


def table_rows(model: type[BaseModel]) -> list[str]:
    """One Markdown row per plain key of ``model``; a key without a description is refused."""
    rows = []
    for name, field in model.model_fields.items():
        if _model_of(field.annotation) or _mapping_of(field.annotation):
            continue
        if not field.description:
            raise ValueError(
                f"{model.__name__}.{name} has no description: add description=... to its "
                "Field in src/watchkeeper/config/"
            )
        meaning = _cell(field.description) + _bounds(field)
        row = [f"`{name}`", _type_name(field.annotation), _default(field), meaning]
        rows.append("| " + " | ".join(row) + " |")
    for name, kind, default, meaning in _SHORTHANDS.get(model.__name__, []):
        rows.append(f"| `{name}` | {kind} | {default} | {meaning} |")
    if model.model_config.get("extra") == "allow":
        rows.append("| other keys | | | the adapter's own options |")
    return rows


def _tables(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel], str]]:
    """Every table under ``model``: its header, its model, and a note on its name."""
    for name, field in model.model_fields.items():
        nested = _model_of(field.annotation)
        if nested is not None:
            header = f"{path}.{name}" if path else name
            yield header, nested, ""
            yield from _tables(nested, header)
            continue
        mapping = _mapping_of(field.annotation)
        if mapping is None:
            continue
        key_type, nested = mapping
        choices = typing.get_args(key_type) if typing.get_origin(key_type) is typing.Literal else ()
        placeholder = "ACTION" if choices else _PLACEHOLDERS.get(name, "NAME")
        header = f"{path}.{name}.{placeholder}" if path else f"{name}.{placeholder}"
        note = f"`ACTION` is one of {', '.join(f'`{c}`' for c in choices)}." if choices else ""
        if field.description:
            note = f"{_cell(field.description)} {note}".strip()
        yield header, nested, note
        yield from _tables(nested, header)


def config_reference() -> str:
    """The Markdown reference of every key of ``watchkeeper.toml``."""
    from watchkeeper.config import Settings

    head = "| key | type | default | meaning |\n|---|---|---|---|"
    parts = ["### Top-level keys", "", head, *table_rows(Settings)]
    for header, model, note in _tables(Settings, ""):
        parts += ["", f"### `[{header}]`", "", _prose(model.__doc__)]
        if note:
            parts += ["", note]
        parts += ["", head, *table_rows(model)]
    return "\n".join(parts)


# The CLI reference


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name in sorted(getattr(command, "commands", {}) or {}):
        sub = command.commands[name]
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, [*path, name])


def _param_row(param: Any) -> str | None:
    if getattr(param, "hidden", False):
        return None
    is_option = hasattr(param, "is_flag")
    if is_option:
        # What to type after an option that takes a value, as --help shows it: `--name NAME`.
        value = "" if param.is_flag or param.count or not param.metavar else f" {param.metavar}"
        names = ", ".join(f"`{opt}{value}`" for opt in [*param.opts, *param.secondary_opts])
    else:
        names = f"`{(param.metavar or param.name).upper()}`"
    default = param.default
    if callable(default) or default is None or (is_option and param.is_flag and not default):
        shown = ""
    elif isinstance(default, list | tuple):
        shown = _cell(", ".join(map(str, default))) if default else ""
    else:
        shown = f"`{_cell(str(default))}`"
    envvar = param.envvar
    if isinstance(envvar, list | tuple):
        envvar = ", ".join(envvar)
    env = f"`{envvar}`" if envvar else ""
    meaning = _cell(param.help or "")
    if param.required:
        meaning = f"(required) {meaning}".strip()
    return f"| {names} | {shown} | {env} | {meaning} |"


def cli_reference() -> str:
    """The Markdown reference of every command, argument and option of ``watchkeeper``."""
    import typer

    from watchkeeper.cli.app import app

    root = typer.main.get_command(app)
    parts = ["| command | what it does |", "|---|---|"]
    for path, command in _commands(root, ["watchkeeper"]):
        if len(path) > 1:
            first = _prose((command.help or "").split("\f")[0].replace("\b", ""))
            anchor = "-".join(path).lower()
            summary = _cell(first.split(". ")[0].rstrip("."))
            parts.append(f"| [`{' '.join(path[1:])}`](#{anchor}) | {summary} |")
    parts.append("")
    for path, command in _commands(root, ["watchkeeper"]):
        is_group = bool(getattr(command, "commands", None))
        name = " ".join(path)
        params = [p for p in command.params if p.name != "help"]
        args = " ".join((p.metavar or p.name).upper() for p in params if not hasattr(p, "is_flag"))
        usage = f"{name} [OPTIONS]{' COMMAND' if is_group else ''}{' ' + args if args else ''}"
        help_text = (command.help or "").split("\f")[0]
        heading = "#" * min(3 + len(path) - 2, 4) if len(path) > 1 else "###"
        parts += [f"{heading} `{name}`", "", "```text", usage, "```", ""]
        if help_text.strip():
            parts += [_prose(help_text.replace("\b", "")), ""]
        rows = [row for row in map(_param_row, params) if row]
        if rows:
            parts += ["| argument or option | default | environment | meaning |"]
            parts += ["|---|---|---|---|", *rows, ""]
    return "\n".join(parts).rstrip()


# Pages

_SECTIONS: dict[str, tuple[str, Callable[[], str]]] = {
    "configuration.md": ("config-reference", config_reference),
    "cli.md": ("cli-reference", cli_reference),
}


def render_page(page: str, text: str) -> str:
    """``text`` of ``docs/PAGE`` with its generated section replaced by a fresh one."""
    name, render = _SECTIONS[page]
    begin, end = _marker(name)
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(
            f"docs/{page} has no generated section: put the lines\n{begin}\n{end}\n"
            "where the reference belongs"
        )
    fresh = f"{begin}\n\n{render()}\n\n{end}"
    return pattern.sub(lambda _match: fresh, text, count=1)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the pages, or with ``--check`` tell which are out of date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    options = parser.parse_args(argv)
    stale = []
    for page in _SECTIONS:
        path = DOCS / page
        text = path.read_text(encoding="utf-8")
        fresh = render_page(page, text)
        if fresh == text:
            continue
        stale.append(page)
        if not options.check:
            path.write_text(fresh, encoding="utf-8")
    if options.check and stale:
        print(f"out of date: {', '.join(stale)}; run `{COMMAND}`", file=sys.stderr)
        return 1
    for page in stale:
        print(f"rewrote docs/{page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
