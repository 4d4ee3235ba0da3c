"""Where a run's files live: ``<data_dir>/procs/<run_id>/``."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.procs.witness import LOG_NAME, OWNER_NAME, WITNESS_NAME

HOOKS_LOG_NAME = "hooks.log"


def procs_dir(data_dir: Path) -> Path:
    """The folder of every run, absolute.

    A run's shim starts in the command's own folder and is handed these paths,
    so a relative data folder would name a folder that is not there.
    """
    return data_dir.absolute() / "procs"


def run_dir(data_dir: Path, run_id: str) -> Path:
    """The folder of one run: its log, owner and witness files."""
    return procs_dir(data_dir) / run_id


def log_path(data_dir: Path, run_id: str) -> Path:
    """The run's combined stdout and stderr."""
    return run_dir(data_dir, run_id) / LOG_NAME


def witness_path(data_dir: Path, run_id: str) -> Path:
    """The witness file, present once the command has exited."""
    return run_dir(data_dir, run_id) / WITNESS_NAME


def owner_path(data_dir: Path, run_id: str) -> Path:
    """The owner the shim reported, kept in case the launcher died before recording it."""
    return run_dir(data_dir, run_id) / OWNER_NAME


def read_tail(path: Path, max_bytes: int = 65536) -> str:
    """The last ``max_bytes`` of a file as text (empty if missing)."""
    try:
        with path.open("rb") as file:
            file.seek(0, 2)
            size = file.tell()
            file.seek(max(0, size - max_bytes))
            return file.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
