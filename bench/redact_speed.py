"""How fast :func:`watchkeeper.redact.redact` reads ordinary log text.

The text is about 1 MB of what the product redacts day to day and that holds no secret:
test runners' output (the summariser's samples), the docs' prose, access-log lines, git
log lines with SHAs and UUIDs, interleaved line by line. It is redacted whole (as a
process's log is read) and line by line (as the live log and the timeline see it).
Prints the median of ``--runs`` timings of each, in CPU time (the machine may be
busy), after the first redaction of the process, which is timed alone: it imports the
detectors (detect-secrets' plugins) where a tree loads them lazily. To compare two
trees, write the text once (``--write PATH``) and read it in each (``--corpus PATH``),
running this script with each tree's ``src`` on ``PYTHONPATH``.

    .venv/bin/python bench/redact_speed.py [--corpus PATH | --write PATH] [--runs 5]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from watchkeeper.redact import redact

ROOT = Path(__file__).resolve().parents[1]
SIZE = 1024 * 1024


def corpus() -> str:
    """About 1 MB of ordinary output, the same every time."""
    sources = sorted((ROOT / "tests" / "unit" / "timeline" / "samples").glob("*.txt"))
    sources += sorted((ROOT / "docs").glob("*.md"))
    lines = [line for path in sources for line in path.read_text(encoding="utf-8").splitlines()]
    made = []
    for i in range(4000):
        made.append(
            f'127.0.0.1:5{i % 10000:04d} - "GET /api/v1/runs?all=true&limit={i} HTTP/1.1" 200'
        )
        made.append(f"commit {uuid.UUID(int=i * 7919).hex}{i:08x} run {uuid.UUID(int=i)} moved")
    mixed = [line for pair in itertools.zip_longest(lines, made) for line in pair if line]
    out, size = [], 0
    for line in itertools.cycle(mixed):
        if size + len(line) + 1 > SIZE:
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) + "\n"


def _median(runs: int, work: Callable[[], object]) -> float:
    timings = []
    for _ in range(runs):
        start = time.process_time()
        work()
        timings.append(time.process_time() - start)
    return statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="read the text from this file")
    parser.add_argument("--write", type=Path, help="write the text to this file and stop")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    text = args.corpus.read_text(encoding="utf-8") if args.corpus else corpus()
    if args.write:
        args.write.write_text(text, encoding="utf-8")
        print(f"wrote {len(text.encode())} bytes to {args.write}")
        return
    lines = text.splitlines(keepends=True)
    started = time.perf_counter()
    redact("first")
    first = time.perf_counter() - started
    changed = sum(redact(line) != line for line in lines)
    whole = _median(args.runs, lambda: redact(text))
    each = _median(args.runs, lambda: [redact(line) for line in lines])
    print(f"{len(text.encode()) / 1e6:.2f} MB, {len(lines)} lines, {changed} lines changed")
    print(f"first call:   {first * 1000:.1f} ms (wall time, once)")
    print(f"whole text:   {whole * 1000:.1f} ms (median of {args.runs})")
    print(f"line by line: {each * 1000:.1f} ms (median of {args.runs})")


if __name__ == "__main__":
    main()
