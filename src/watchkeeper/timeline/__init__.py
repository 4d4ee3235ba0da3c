"""What a run did: events per phase, spend, signed execution records, forge webhooks.

Its events are :mod:`watchkeeper.records.timeline` (frozen, no I/O, what the
store builds). One noun per module: :mod:`service` (ingest, price and read events; the progress
rule), :mod:`prices` (what a call cost on the provider it ran on), :mod:`spend`
(rollups), :mod:`record` (signed execution records), :mod:`forge` (GitHub and
Linear webhooks), :mod:`otel` (OpenTelemetry spans).
"""
