"""Prometheus metrics of the sweep loop, in a registry of its own (one per app)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client import Counter as PromCounter

from watchkeeper.contract import KindRead
from watchkeeper.watch.lifecycle import Judged


class SweepMetrics:
    """Runs by kind and verdict, sweep duration and outcome, unreadable kinds."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.runs = Gauge(
            "watchkeeper_runs",
            "Runs seen in the latest sweep, by kind and verdict (ok when nothing is wrong).",
            ["kind", "verdict"],
            registry=self.registry,
        )
        self.sweep_duration = Histogram(
            "watchkeeper_sweep_duration_seconds",
            "Time one sweep took: read every kind, judge, reconcile incidents.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.sweeps = PromCounter(
            "watchkeeper_sweeps",
            "Sweeps by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.unreadable = Gauge(
            "watchkeeper_kind_unreadable",
            "1 when the kind's store could not be read in the latest sweep.",
            ["kind"],
            registry=self.registry,
        )
        self.supervision_working = Gauge(
            "watchkeeper_supervision_working",
            "0 while sweeps keep failing.",
            registry=self.registry,
        )
        self.supervision_working.set(1)

    def observe(self, reads: Sequence[KindRead], judged: Mapping[str, Sequence[Judged]]) -> None:
        """Record one successful sweep."""
        for read in reads:
            self.unreadable.labels(read.kind).set(0 if read.readable else 1)
        self.runs.clear()
        considered = {read.kind: read.considered for read in reads if read.readable}
        for kind, items in judged.items():
            counts = Counter(item.verdict.condition.value for item in items if item.verdict)
            # Runs a sweep read left out were found fine by the kind's own index.
            counts["ok"] = considered.get(kind, len(items)) - sum(counts.values())
            for verdict, count in counts.items():
                self.runs.labels(kind, verdict).set(count)
