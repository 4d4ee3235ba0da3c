"""Who may do what: API tokens and dashboard sessions, as services over their stores.

Routes, pages and commands reach tokens and sessions only through these
services; the rows themselves stay in :mod:`watchkeeper.store`.
"""
