"""The hook signing key kept in the data folder, made once whoever races to make it."""

from __future__ import annotations

import threading
from pathlib import Path

from watchkeeper.procs import hooks


def test_racing_threads_all_get_the_one_key(tmp_path: Path) -> None:
    racers = 32
    start = threading.Barrier(racers)
    keys: list[bytes] = []
    failures: list[BaseException] = []

    def race() -> None:
        start.wait()
        try:
            keys.append(hooks.hook_secret(tmp_path, None))
        except Exception as exc:  # noqa: BLE001 - any failure is what the test looks for
            failures.append(exc)

    threads = [threading.Thread(target=race) for _ in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(keys) == racers
    assert len(set(keys)) == 1 and len(keys[0]) == 64
    assert hooks.hook_secret(tmp_path, None) == keys[0]
    kept = [p.name for p in (tmp_path / "procs").iterdir()]
    assert kept == [hooks.SECRET_FILE]  # no draft left behind


def test_a_configured_secret_wins(tmp_path: Path) -> None:
    assert hooks.hook_secret(tmp_path, "from-config") == b"from-config"
    assert not (tmp_path / "procs").exists()
