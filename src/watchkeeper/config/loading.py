"""Reading ``watchkeeper.toml``: find it, decode it, validate it, explain a bad one."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from watchkeeper.config.programs import rebased
from watchkeeper.config.secrets import SECRET_KEYS
from watchkeeper.config.settings import Settings
from watchkeeper.errors import ConfigError
from watchkeeper.paths import CONFIG_ENV, DATABASE_URL_ENV
from watchkeeper.redact import redact


def explain(error: ValidationError, source: str) -> str:
    """One message per problem: the key, its value (never a secret's) and what is expected."""
    lines = []
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = str(problem["msg"]).removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            lines.append(f"{source}: unknown key {key!r}: remove it or check its spelling")
            continue
        if problem["type"] == "missing":
            lines.append(f"{source}: {key} is required")
            continue
        # Only what was written in the file is redacted: a key's own name (``bot_token_env``)
        # looks like a secret's label to the patterns, and would hide the advice after it.
        lines.append(f"{source}: {key}{redact(_shown(problem))}: {redact(message)}")
    return "\n".join(lines)


def _shown(problem: Any) -> str:
    """`` = value`` for a plain scalar; nothing a secret or a whole table could leak through."""
    loc = problem["loc"]
    value = problem.get("input")
    if loc and str(loc[-1]) in SECRET_KEYS:
        return " (hidden)"
    if isinstance(value, dict | list) or value is None:
        return ""
    return f" = {value!r}"


def parse(
    raw: dict[str, Any], source: str = "configuration", base_dir: Path | None = None
) -> Settings:
    """Validate a decoded TOML document; relative ``data_dir`` is taken from ``base_dir``."""
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(explain(exc, source)) from None
    env_url = os.environ.get(DATABASE_URL_ENV)
    updates: dict[str, Any] = {}
    if env_url:
        updates["database_url"] = env_url
    if base_dir is not None and not settings.data_dir.is_absolute():
        updates["data_dir"] = base_dir / settings.data_dir
    if base_dir is not None and settings.programs:
        updates["programs"] = rebased(settings.programs, base_dir)
    if updates:
        try:
            settings = Settings.model_validate({**settings.model_dump(), **updates})
        except ValidationError as exc:
            raise ConfigError(explain(exc, DATABASE_URL_ENV)) from None
    return settings


def load(path: str | Path | None = None) -> Settings:
    """Load the configuration named by ``path`` or ``WATCHKEEPER_CONFIG``, or the defaults."""
    chosen = path or os.environ.get(CONFIG_ENV)
    if not chosen:
        return parse({}, "defaults")
    file = Path(chosen)
    if not file.is_file():
        raise ConfigError(
            f"{file}: no such configuration file; pass an existing file with --config "
            f"or unset {CONFIG_ENV}"
        )
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot be read: {exc}") from None
    return parse(raw, str(file), base_dir=file.parent.resolve())
