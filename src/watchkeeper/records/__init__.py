"""The rows the store keeps for watchkeeper's own work, as frozen records.

Leaves of the import graph: they import only :mod:`watchkeeper.clock`, so the
store can build them without importing any service. One module per service
that owns the rows: :mod:`procs` (started processes, hooks, parks),
:mod:`queue` (jobs, tasks, runners, leases), :mod:`timeline` (run events).
"""
