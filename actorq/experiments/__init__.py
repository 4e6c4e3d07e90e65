"""Experiments (lab): many training runs, one subprocess at a time, resumable, with their records.

:mod:`~actorq.experiments.experiment` is ``actorq experiment`` (one run per precision, seed and sweep value) on
:mod:`~actorq.experiments.orchestration`, which the Acme baseline uses too; :mod:`~actorq.experiments.grid` is
``actorq grid`` (the cells of a committed grid file); :mod:`~actorq.experiments.prereg` holds a preregistered grid
to its frozen file; :mod:`~actorq.experiments.actor_probe` is ``actorq bench actor-probe`` (a cell's actors'
staleness, exploration and int8-vs-fp32 agreement). A run is an ``actorq train`` subprocess: experiments read
its run directory (``config.yaml``, ``summary.json``, metrics, status records), never its code's internals.
"""
