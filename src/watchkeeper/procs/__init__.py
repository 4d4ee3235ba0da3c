"""Processes watchkeeper starts: registry, detached start, witness, abort, reaping, wake.

Kept free of imports so ``python -m watchkeeper.procs.shim`` starts fast; import
the module you need (``watchkeeper.procs.engine`` for the whole engine).
"""
