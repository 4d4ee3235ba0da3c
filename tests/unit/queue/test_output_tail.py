"""The output tail a runner sends: cut at a line's start, cleaned, redacted, bounded."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.queue.output import clean, read_tail


def test_a_tail_starts_at_a_lines_start_and_fits_its_limit(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"".join(b"line %04d\n" % i for i in range(500)))
    tail = read_tail(log, limit=1000)
    assert tail.startswith("line ") and tail.endswith("line 0499\n")
    assert len(tail.encode()) <= 1000
    assert "line 0000" not in tail


def test_a_secret_at_the_cut_is_never_half_kept(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    secret = "password=hunter2-correct-horse"
    log.write_text(f"{secret}\n" + "ok\n" * 10)
    # The cut falls inside the secret's line: that line is dropped, not half sent.
    tail = read_tail(log, limit=len("ok\n") * 10 + 8)
    assert tail == "ok\n" * 10


def test_terminal_codes_and_control_characters_go_and_secrets_are_masked() -> None:
    text = "\x1b[31mred\x1b[0m and\x00 bell\x07\tTOKEN=abcdef123456\r\n"
    assert clean(text) == "red and bell\tTOKEN=[redacted]\r\n"


def test_a_missing_log_has_no_tail(tmp_path: Path) -> None:
    assert read_tail(tmp_path / "gone.log") == ""
