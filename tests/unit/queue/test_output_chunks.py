"""What a runner ships of a running task's log: what it gained, cut at a line's end,
cleaned and redacted; the rest when the task ends; over the cap, cut at a line's end."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.queue.output import cut_to, read_chunk


def test_a_chunk_ends_at_the_last_line_end_and_the_unfinished_line_waits(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"one\ntwo\nTOKEN=abcdef1234567")
    chunk = read_chunk(log, 0, final=False)
    assert chunk is not None
    assert (chunk.offset, chunk.end, chunk.text) == (0, 8, "one\ntwo\n")
    # Nothing whole to ship yet: the half line may be the start of a secret.
    assert read_chunk(log, 8, final=False) is None
    with log.open("ab") as out:
        out.write(b"89\nthree\n")
    later = read_chunk(log, 8, final=False)
    assert later is not None
    assert later.text == "TOKEN=[redacted]\nthree\n"
    assert later.end == log.stat().st_size


def test_at_the_end_the_rest_goes_whole_lines_or_not(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_bytes(b"one\nno newline at the end")
    chunk = read_chunk(log, 4, final=True)
    assert chunk is not None
    assert chunk.text == "no newline at the end"
    assert chunk.end == log.stat().st_size
    assert read_chunk(log, chunk.end, final=True) is None


def test_a_line_longer_than_a_chunk_is_cut_anyway_on_a_character_boundary(
    tmp_path: Path,
) -> None:
    log = tmp_path / "run.log"
    log.write_bytes("é".encode() * 100)  # two bytes each, no newline
    chunk = read_chunk(log, 1, final=False, limit=11)
    assert chunk is not None
    # From offset 1 the first byte is half a character: it is replaced, never split further.
    assert chunk.end - chunk.offset <= 11
    rest = read_chunk(log, chunk.end, final=False, limit=11)
    assert rest is not None and rest.offset == chunk.end
    assert rest.text == "é" * ((rest.end - rest.offset) // 2)


def test_a_missing_log_ships_nothing(tmp_path: Path) -> None:
    assert read_chunk(tmp_path / "gone.log", 0, final=True) is None


def test_over_the_cap_text_is_cut_at_a_line_end_or_a_character_boundary() -> None:
    assert cut_to("one\ntwo\nthree\n", 9) == "one\ntwo\n"
    assert cut_to("one\n", 10) == "one\n"
    assert cut_to("ééé", 5) == "éé"
    assert cut_to("anything", 0) == ""
