"""Jobs and tasks leased by executor daemons ("runners").

Its rows are :mod:`watchkeeper.records.queue`. One noun per module: :mod:`rules` (who may lease
what, and why a queued task waits), :mod:`rollup` (a job's status from its
tasks), :mod:`service` (the queue as one object), :mod:`control` (cancel,
retry, delete), :mod:`launcher` (cold-starting runners), :mod:`topology`,
:mod:`runner` (the daemon).
"""
