"""What a run did: events per phase, spend, signed execution records, forge webhooks.

One noun per module: :mod:`events` (frozen records, no I/O: the only module the
store imports), :mod:`service` (ingest, price and read events; the progress
rule), :mod:`prices` (what a call cost on the provider it ran on), :mod:`spend`
(rollups), :mod:`record` (signed execution records), :mod:`forge` (GitHub and
Linear webhooks), :mod:`otel` (OpenTelemetry spans).
"""
