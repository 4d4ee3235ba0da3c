"""Programs ``serve`` keeps running on its host: ``[programs.NAME]`` in ``watchkeeper.toml``.

Built on the supervision library (:mod:`watchkeeper.supervise`): one supervisor per
group, each program a process child under a keeper that holds its process tree
(:mod:`.keeper`). :class:`~watchkeeper.programs.host.ProgramHost` runs them;
:mod:`.view` shows them; docs/programs.md describes them.

Kept free of imports so ``python -m watchkeeper.programs.keeper`` starts fast.
"""
