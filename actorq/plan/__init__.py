"""``actorq plan`` (runtime): before a day of runs, what quantized actors buy on this machine.

:mod:`~actorq.plan.measure` times the learner and the actors beside each other on each split of the cores (with
:mod:`actorq.measure`'s workers and :mod:`~actorq.plan.side_loads`), :mod:`~actorq.plan.regime` is the one regime
model (``delivered = min(S_p, C / spi)``; the report labels runs with it too), :mod:`~actorq.plan.model` predicts
env steps/s and speed-ups per setting from it and names the best, :mod:`~actorq.plan.cli` is the command.
"""
