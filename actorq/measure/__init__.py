"""Timing this machine's roles in worker processes (runtime): what ``actorq plan`` measures, and the ``actorq bench``
commands reuse.

:mod:`~actorq.measure.protocol` is the one worker protocol (a ``python -m`` process owned by pid, JSON commands on
stdin, ``@@tag payload`` answers); :mod:`~actorq.measure.actors_worker` times real ``ActorRole`` processes per
precision and kernel, :mod:`~actorq.measure.learner_worker` a real ``LearnerRole`` (variants:
:mod:`~actorq.measure.learner_variants`); :mod:`~actorq.measure.common` holds the machine record and the order rule.
"""
