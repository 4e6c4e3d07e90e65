"""Launchers: which roles a run has and how they are started, watched and stopped.

:mod:`~actorq.launchers.train` is ``actorq train``. One :class:`~actorq.launchers.supervisor.Supervisor` owns every
run's lifecycle (start order, health and restarts, budgets and target, learner-first stop, summary.json) on a
:class:`~actorq.launchers.placement.Placement`, which only says where roles run: :mod:`~actorq.launchers.local`
(every role a subprocess ``python -m actorq.roles NAME``), :mod:`~actorq.launchers.launchpad_launcher` (the same
roles as Launchpad nodes), :mod:`~actorq.launchers.inprocess` (threads of one process, for debugging) or
:mod:`~actorq.launchers.ray_placement` (Ray actors on a cluster). They share :mod:`~actorq.launchers.topology` (the
roles and their command lines), :mod:`~actorq.launchers.monitor` (stop conditions, progress and summary.json from
the roles' status records) and :mod:`~actorq.launchers.energy` (CPU time and energy of a run).
Experiments of many runs (``actorq experiment``, ``actorq grid``) are lab code: :mod:`actorq.experiments`.
"""
