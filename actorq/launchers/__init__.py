"""Launchers: which roles a run has and how they are started, watched and stopped.

:mod:`~actorq.launchers.train` is ``actorq train``; it runs one of :mod:`~actorq.launchers.local` (every role a
subprocess ``python -m actorq.roles NAME``), :mod:`~actorq.launchers.launchpad_launcher` (the same roles as
Launchpad nodes) or :mod:`~actorq.launchers.inprocess` (threads of one process, for debugging). They share
:mod:`~actorq.launchers.topology` (the roles and their command lines), :mod:`~actorq.launchers.monitor` (stop
conditions, progress, summary.json) and :mod:`~actorq.launchers.energy` (CPU time and energy of a run).
:mod:`~actorq.launchers.experiment` is ``actorq experiment`` (one run per precision and seed) on
:mod:`~actorq.launchers.orchestration`, which the Acme baseline bench uses too.
"""
