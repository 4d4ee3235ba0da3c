"""``watchkeeper run -- CMD`` on this host without Typer, pydantic or SQLAlchemy.

Agents run many short commands under ``watchkeeper run``, and loading the command-line
framework, the configuration model and the database layer took longer than everything
the command does. :func:`run` takes the forms it reads exactly,

    watchkeeper [--config FILE] run [--detach|-d] [--name NAME] [--session ID]
                                    [--budget DURATION] [--timeout DURATION] -- CMD ...

records, starts, waits for and settles the run with the very code the full command uses
(:mod:`watchkeeper.procs.launch`, :mod:`watchkeeper.procs.reaper`) over the standard
library's ``sqlite3`` (:mod:`watchkeeper.store.lite.procs`), and exits as it would.

It records on the embedded store only where no server is in reach: no
``WATCHKEEPER_URL``, and nothing answers at the default URL (one connection on
loopback, refused at once when no server listens). It says so in one line on stderr,
as the full command does. A server named or answering goes to the full command, which
records the run there (:mod:`watchkeeper.procs.reported`).

It leaves to the full command line everything it cannot do exactly the same: any other
option or form, ``--server``, a server in reach, a duration it cannot read (the full
command says what is wrong with it), a configuration file with more than ``data_dir``
in it (its other tables are checked by the configuration model),
``WATCHKEEPER_DATABASE_URL``, a store that does not exist yet or is behind the shipped
schema (the full store creates and migrates it), and completion hooks that came due (the
full engine fires them). Each of these is decided before anything is recorded, so a
command never starts twice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchkeeper.store.lite.procs import LiteRuns

_VALUED = {
    "--name": "name",
    "--session": "session",
    "--budget": "budget",
    "--timeout": "timeout",
}
_FLAGS = {"--detach": "detach", "-d": "detach"}


def main(argv: Sequence[str]) -> int | None:
    """Run the command line ``argv`` when it is a ``run`` this path takes; its exit status,
    or ``None`` (nothing was recorded or started)."""
    from watchkeeper.cli.fast.commands import split_config

    found = split_config(argv)
    if found is None or found[1][:1] != ["run"]:
        return None
    config_path, words = found
    return run(words[1:], config_path)


def run(words: list[str], config_path: str | None) -> int | None:
    """Run ``words`` (what follows ``run``) and return the exit status; ``None``: not a
    form this path takes (nothing was recorded or started)."""
    from watchkeeper.cli.fast.commands import read_options

    if "--" not in words:
        return None
    cut = words.index("--")
    read = read_options(words[:cut], _VALUED, _FLAGS)
    argv = words[cut + 1 :]
    if read is None or read[0] or not argv:
        return None
    options = read[1]
    durations = _durations(options)
    if durations is None:
        return None
    data_dir = embedded_data_dir(config_path)
    if data_dir is None or _server_in_reach():
        return None
    from watchkeeper.paths import DATABASE_FILE
    from watchkeeper.store.lite.procs import open_lite
    from watchkeeper.store.shipped import shipped_head

    head = shipped_head()
    procs = None if head is None else open_lite(data_dir / DATABASE_FILE, head)
    if procs is None:
        return None
    from watchkeeper.cli.fast.commands import aborted, told

    try:
        return _started(procs, data_dir, argv, options, durations, config_path)
    except KeyboardInterrupt:
        return aborted()
    except Exception as exc:  # noqa: BLE001 - told as the full command line tells it
        return told(exc)
    finally:
        procs.close()


def _server_in_reach() -> bool:
    """Whether a server is named (``WATCHKEEPER_URL``) or answers at the default URL: the
    run is recorded there, by the full command."""
    from watchkeeper.client.wire import DEFAULT_URL, URL_ENV

    if os.environ.get(URL_ENV):
        return True
    from watchkeeper.client.locate import answers

    return answers(DEFAULT_URL)


def _durations(options: dict[str, str]) -> tuple[float | None, float | None] | None:
    """``--budget`` and ``--timeout`` in seconds; ``None`` when either is not a positive
    duration (the full command line refuses it in its own words)."""
    from watchkeeper.durations import seconds_of

    read = {name: seconds_of(options[name]) for name in ("budget", "timeout") if name in options}
    if any(seconds is None or seconds <= 0 for seconds in read.values()):
        return None
    return read.get("budget"), read.get("timeout")


def embedded_data_dir(config_path: str | None) -> Path | None:
    """The data folder of the embedded store as the configuration model would resolve it;
    ``None`` when only the model can say (a file with more in it, or another database)."""
    from watchkeeper.paths import DATABASE_URL_ENV, DEFAULT_DATA_DIR

    if os.environ.get(DATABASE_URL_ENV):
        return None
    if not config_path:
        return Path(DEFAULT_DATA_DIR)
    import tomllib

    file = Path(config_path)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # the full command line says what is wrong with it
    value = raw.get("data_dir", DEFAULT_DATA_DIR)
    if set(raw) - {"data_dir"} or not isinstance(value, str):
        return None
    folder = Path(value)
    return folder if folder.is_absolute() else file.parent.resolve() / folder


def _started(
    procs: LiteRuns,
    data_dir: Path,
    argv: list[str],
    options: dict[str, str],
    durations: tuple[float | None, float | None],
    config_path: str | None,
) -> int:
    from watchkeeper.clock import utcnow
    from watchkeeper.paths import SESSION_ENV
    from watchkeeper.procs import identity, launch, reaper, settle

    detach = "detach" in options
    request = launch.LaunchRequest(
        argv=tuple(argv),
        name=options.get("name"),
        detach=detach,
        session=options.get("session") or os.environ.get(SESSION_ENV) or None,
        budget_s=durations[0],
        timeout_s=durations[1],
    )
    launched = launch.launch(procs, data_dir, request, utcnow, tee=not detach)
    from watchkeeper.client.locate import no_server, note
    from watchkeeper.client.wire import DEFAULT_URL

    note(no_server(DEFAULT_URL, "recorded in", data_dir))
    if detach:
        from watchkeeper.cli.console import console

        console.print(launched.run.run_id, highlight=False)
        return 0
    launch.wait_foreground(launched)
    reaper.reap(procs, data_dir, utcnow())
    if procs.hooks_due(identity.engine_key(data_dir)):
        _fire_hooks(config_path)
    ended = procs.get(launched.run.run_id)
    return settle.exit_status(ended.exit_code, ended.signal, ended.status.value)


def _fire_hooks(config_path: str | None) -> None:
    """What the full engine does after a run: fire the completion hooks that came due."""
    from contextlib import closing

    from watchkeeper import config
    from watchkeeper.procs.engine import ProcEngine

    with closing(ProcEngine.open(config.load(config_path))) as engine:
        engine.reap()
